"""`ctxtool eval`: how well a checkpoint lets the agent carry on (probe-based evaluation)."""

from __future__ import annotations

import click

from ..compaction.summarizers import endpoint_configured
from ..core.cells import shorten
from ..evaluation.judge import Judge, JudgedProbe
from ..evaluation.stored import CheckpointEvaluation, evaluate_checkpoint
from ..output import OutputFormat, Progress, dumps, print_rows
from ..store.reads import Store
from ..terminal import fit_table, table_width, wrap
from .app import pass_app
from .options import output_options, session_argument
from .root import main
from .types import WholeNumber

KEY_WIDTH = 60  # characters of a probe's key shown in the table


@main.command("eval")
@session_argument()
@click.option(
    "--at",
    "at",
    type=WholeNumber(),
    metavar="CHECKPOINT",
    help="The checkpoint to evaluate (its id, see `context checkpoints`; -1 the latest, "
    "-2 the one before). Default: the latest.",
)
@click.option(
    "--judge",
    "judge_model",
    metavar="MODEL",
    help="Also let this model answer the probes only the summary can answer, from the "
    "context alone, and grade its answers (2 requests a probe).",
)
@click.option(
    "--base-url",
    envvar="OPENAI_BASE_URL",
    help="The judge's OpenAI-compatible endpoint [env OPENAI_BASE_URL]. The key comes from "
    "OPENAI_API_KEY.",
)
@output_options
@pass_app
def eval_command(app, session, at, judge_model, base_url, output: OutputFormat):
    """Ask a checkpoint the questions a continuing agent has, and say which its restored
    context answers.

    The probes (goal, latest request, open tasks, failures and their fixes, files changed,
    instructions, decisions, current work) come from the history before the cut, read from
    its structure; each is answered by key against the summary and the kept messages, and
    the table says where it was found. The score counts only the probes the summary alone
    can answer, averaged per kind. Fabrications are paths, commands, error names and
    identifiers the summary states that the history never contained. SESSION is its id, its
    source id (e.g. the transcript's UUID) or a unique prefix.

    \b
    Example: ctxtool eval 42
             ctxtool eval a5c478e1 --at -2 --json | jq .score
             ctxtool eval 42 --judge gpt-4.1-mini
    """
    judge = None
    if judge_model:
        if not endpoint_configured(base_url):
            raise click.UsageError(
                "--judge needs an endpoint or a key: set OPENAI_API_KEY (api.openai.com), or "
                "--base-url / OPENAI_BASE_URL for a compatible server"
            )
        judge = Judge(judge_model, base_url)
    store = Store(app.checked_engine())
    if judge is None:
        result = evaluate_checkpoint(store, session, at)
    else:
        with Progress(None, "judging probes") as progress:
            result = evaluate_checkpoint(store, session, at, judge, lambda _: progress.update(1))
    if output.json:  # the whole evaluation, one document (its score, its probes)
        click.echo(dumps(result.as_dict()))
    elif output.machine:  # --nl / --csv: a row a probe
        print_rows(probe_rows(result), output)
    else:
        click.echo(evaluation_text(result, table_width(None), output))


def probe_rows(result: CheckpointEvaluation) -> list[dict]:
    """A row a probe: whether the restored context holds its answer, where, whether it counts
    in the score (only the probes the summary alone can answer do), and what was looked for:
    any of the spellings a/b, and every group joined by +."""
    judged = {j.probe.id: j for j in result.judged}
    return [
        {
            "probe": v.probe.id,
            "held": "yes" if v.held else "NO",
            "where": ", ".join(v.where) or "-",
            "in score": "yes" if v.summary_only else "no, kept verbatim",
            **({"judge": _judged(judged.get(v.probe.id))} if judged else {}),
            "looked for": shorten(" + ".join(" / ".join(g) for g in v.probe.all_of), KEY_WIDTH),
        }
        for v in result.evaluation.verdicts
    ]


def evaluation_text(
    result: CheckpointEvaluation, width: int | None = None, output: OutputFormat | None = None
) -> str:
    """The evaluation as text: one header line, the probes, fabrications, section costs, fitted
    to ``width`` (None: lines whole)."""
    e = result.evaluation
    cp = result.checkpoint
    score = "n/a (no probe only the summary can answer)" if e.score is None else f"{e.score:.0%}"
    held = sum(v.held for v in e.summary_only)
    lines = [
        f"Session {result.session_id}, checkpoint {cp.id} ({cp.summarizer or 'unknown'}): "
        f"{result.summarized} messages summarized, {result.kept} kept",
        f"score {score} by kind ({held} held of {len(e.summary_only)} probes only the summary "
        "can answer), "
        f"{len(e.fabrications)} fabrication{'s' if len(e.fabrications) != 1 else ''}, "
        f"summary {e.summary_tokens} tokens",
    ]
    if result.judged:
        correct = sum(j.correct for j in result.judged)
        lines.append(f"judge: {correct}/{len(result.judged)} of those answered correctly")
    rows = probe_rows(result)
    table = (
        fit_table(
            rows,
            output or OutputFormat(),
            list(rows[0]),
            width,
            ["where", "looked for"],
            wrapped=["where"],  # the places are read whole, broken into lines
        )
        if rows
        else None
    )
    after = (
        [
            "Fabrications (stated by the summary, found nowhere in the history):",
            *(f"  {f.kind}: {f.text}" for f in e.fabrications),
        ]
        if e.fabrications
        else ["Fabrications: none"]
    )
    after.append(
        "Summary tokens by section: "
        + (", ".join(f"{s.heading} {s.tokens}" for s in e.sections) or "(empty)")
    )
    return "\n".join(
        [
            *(wrap(line, width, "  ") for line in lines),
            "",
            table or "(no probes)",
            "",
            *(wrap(line, width, "    ") for line in after),
        ]
    )


def _judged(judged: JudgedProbe | None) -> str:
    if judged is None:
        return "-"
    return "yes" if judged.correct else "NO"
