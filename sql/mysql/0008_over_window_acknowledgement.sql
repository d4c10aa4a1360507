-- The operator's acknowledgement that a session stays over its window (`ctxtool sessions mark S
-- --over-window-ok`): when it was given. `compact --all` still reports such a session but no
-- longer fails on it. NULL: not acknowledged. ADD COLUMN at the end is instant.
ALTER TABLE agent_session ADD COLUMN over_window_ok_at DATETIME(6) NULL;
