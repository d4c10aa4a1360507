-- The three tables agent runtimes already write. Their seed columns are fixed; ctxtool's own
-- columns arrive in 0002 so that a database created by a runtime can be adopted with
-- `ctxtool migrate baseline --version 0001` and then upgraded without touching its data.
CREATE TABLE IF NOT EXISTS agent_session (
    session_id  BIGINT       NOT NULL,
    user_id     VARCHAR(191) NULL,
    project_id  VARCHAR(191) NULL,
    title       VARCHAR(512) NULL,
    created_at  DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at  DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (session_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS agent_message (
    id          BIGINT      NOT NULL AUTO_INCREMENT,
    session_id  BIGINT      NOT NULL,
    role        VARCHAR(32) NOT NULL,
    content     MEDIUMTEXT  NULL,
    created_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci /*T![auto_id_cache] AUTO_ID_CACHE=1 */;

CREATE TABLE IF NOT EXISTS agent_compaction (
    id                    BIGINT      NOT NULL AUTO_INCREMENT,
    session_id            BIGINT      NOT NULL,
    summary               MEDIUMTEXT  NOT NULL,
    first_kept_message_id BIGINT      NOT NULL,
    tokens_before         INT         NULL,
    created_at            DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci /*T![auto_id_cache] AUTO_ID_CACHE=1 */;
