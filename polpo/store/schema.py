"""The SQLite schema, versioned with ``PRAGMA user_version``.

Each entry of ``MIGRATIONS`` moves the database one version forward; they run in order inside one
transaction at open time, so a daemon never sees a half-migrated file.
"""

from __future__ import annotations

SCHEDULES_TABLE = """
    CREATE TABLE schedules (
        id          {T} PRIMARY KEY,          -- the mission file's stem (its runs are ID, ID#2, …)
        source      {T} NOT NULL UNIQUE,      -- the mission file
        hash        {T} NOT NULL,             -- sha256 of the bytes it was made from
        spec        {T} NOT NULL,             -- the validated mission document (JSON) each run starts from
        expr        {T} NOT NULL,             -- cron expression, ISO instant or ISO interval
        timezone    {T},
        status      {T} NOT NULL,             -- active | paused | ended | removed
        anchor      {T} NOT NULL,             -- when the file was read
        updated_at  {T} NOT NULL,
        cursor_at   {T},                      -- the newest scheduled instant dealt with
        queued      {I} NOT NULL DEFAULT 0,   -- firings waiting for the active run (overlap "queue")
        last_run    {T}                       -- the newest run's mission id
    );
"""  # shared with the PostgreSQL migration (polpo.store.postgres_schema)

QUESTIONS_TABLE = """
    CREATE TABLE questions (
        id           {T} PRIMARY KEY,         -- the asking attempt's id + "/q"
        task_id      {T} NOT NULL,
        mission_id   {T} NOT NULL,
        attempt_id   {T} NOT NULL,            -- the attempt that asked
        kind         {T} NOT NULL,            -- question | tool (a call awaiting approval)
        source       {T} NOT NULL,            -- ask_human | output (a command agent's) | tool
        text         {T} NOT NULL,            -- the question, or a tool call's name
        arguments    {T},                     -- a tool call's arguments (JSON)
        snapshot     {T},                     -- an LLM agent's conversation up to the call (JSON)
        status       {T} NOT NULL,            -- asked | answered | delivered | withdrawn
        asked_at     {T} NOT NULL,
        expires_at   {T},
        answer       {T},                     -- the answer, or a refused call's reason
        approved     {I},                     -- a tool call: 1 approved, 0 refused
        answered_by  {T},                     -- a person, "model:MODEL" or "timeout"
        answered_at  {T},
        delivered_in {T},                     -- the attempt that received it
        result       {T}                      -- an approved call's result, once it ran
    );
    CREATE INDEX questions_task ON questions(task_id);
    CREATE INDEX questions_status ON questions(status);
"""
"""What agents ask of people (polpo.model.questions), the same on SQLite and PostgreSQL (``T`` text, ``I`` integer)."""


HISTORY_MIGRATION = """
    ALTER TABLE sources ADD COLUMN runs {I} NOT NULL DEFAULT 0;
    ALTER TABLE sources ADD COLUMN stamp {T};
    UPDATE sources SET runs = COALESCE((SELECT MAX(run) FROM missions m WHERE m.source = sources.path), 0);
    DROP INDEX missions_source;
    CREATE INDEX missions_source ON missions(source, seq);
    CREATE INDEX missions_status ON missions(status, seq);
    CREATE INDEX missions_name ON missions(name, seq);
    CREATE INDEX missions_finished ON missions(finished_at);
    CREATE INDEX attempts_mission ON attempts(mission_id);
    CREATE INDEX assessments_attempt ON assessments(attempt_id);
    CREATE INDEX sla_marks_mission ON sla_marks(mission_id);
    CREATE INDEX overrides_mission ON overrides(mission_id);
    CREATE INDEX spend_period ON spend(period);
    CREATE INDEX commands_queued ON commands(id) WHERE status = 'queued';
    CREATE INDEX sources_seen ON sources(seen_at, path);
"""
"""Reads and start-up that cost the same whatever the history (shared with the PostgreSQL migration).

``sources.runs``: the runs started from the path (the next is ``runs + 1``), kept when the missions are pruned, so a
file's run numbers go on; ``sources.stamp``: ``inode:size:mtime`` of the file when its bytes were read, once the
clock has moved on enough to trust it (polpo.intake.stamps): the start-up scan skips a file that still matches, so a
folder of finished files is not read and hashed again at every start. The indexes serve the paged reads (status,
name, a schedule's runs), retention (finished_at, overrides), the spend and SLA reads per mission and per day, and
the command inbox's poll (a partial index of the queued commands), and retention's walk of the files' records."""

MIGRATIONS: list[str] = [
    # v1: the foundation.
    """
    CREATE TABLE sources (
        path        TEXT PRIMARY KEY,   -- absolute path of a mission file
        hash        TEXT NOT NULL,      -- sha256 of the bytes last handled
        outcome     TEXT NOT NULL,      -- accepted | rejected | busy
        mission_id  TEXT,
        seen_at     TEXT NOT NULL
    );
    CREATE TABLE missions (
        id          TEXT PRIMARY KEY,
        seq         INTEGER NOT NULL UNIQUE,  -- acceptance order
        name        TEXT NOT NULL,
        source      TEXT NOT NULL,
        hash        TEXT NOT NULL,
        run         INTEGER NOT NULL,
        spec        TEXT NOT NULL,            -- the validated mission document (JSON)
        workspace   TEXT NOT NULL,
        status      TEXT NOT NULL,            -- running | completed | failed | cancelled
        reason      TEXT,
        report      TEXT,                     -- JSON, set when it finishes
        warnings    TEXT NOT NULL DEFAULT '[]',
        created_at  TEXT NOT NULL,
        finished_at TEXT
    );
    CREATE INDEX missions_source ON missions(source);
    CREATE TABLE tasks (
        id            TEXT PRIMARY KEY,
        mission_id    TEXT NOT NULL,
        idx           INTEGER NOT NULL,
        title         TEXT NOT NULL,
        agent         TEXT NOT NULL,
        status        TEXT NOT NULL,
        reason        TEXT,
        attempts      INTEGER NOT NULL DEFAULT 0,
        retries       INTEGER NOT NULL DEFAULT 0,
        fix_attempts  INTEGER NOT NULL DEFAULT 0,
        total_fixes   INTEGER NOT NULL DEFAULT 0,
        interruptions INTEGER NOT NULL DEFAULT 0,
        next_kind     TEXT NOT NULL DEFAULT 'initial',
        feedback      TEXT,
        updated_at    TEXT NOT NULL,
        started_at    TEXT,
        finished_at   TEXT
    );
    CREATE INDEX tasks_mission ON tasks(mission_id, idx);
    CREATE TABLE attempts (
        id            TEXT PRIMARY KEY,
        task_id       TEXT NOT NULL,
        mission_id    TEXT NOT NULL,
        number        INTEGER NOT NULL,
        kind          TEXT NOT NULL,          -- initial | fix | retry
        agent         TEXT NOT NULL,
        status        TEXT NOT NULL,          -- starting | running | finished | interrupted
        pid           INTEGER,
        pid_ticks     INTEGER,
        exit_code     INTEGER,
        signal        INTEGER,
        timed_out     INTEGER NOT NULL DEFAULT 0,
        error         TEXT,
        stdout_tail   TEXT,
        stderr_tail   TEXT,
        stdout_bytes  INTEGER,
        stderr_bytes  INTEGER,
        duration      REAL,
        files         TEXT,                   -- JSON {created, modified, deleted}
        prompt        TEXT,
        verdict       TEXT,                   -- passed | failed, once assessed
        started_at    TEXT NOT NULL,
        finished_at   TEXT
    );
    CREATE INDEX attempts_task ON attempts(task_id, number);
    CREATE TABLE assessments (
        id          TEXT PRIMARY KEY,
        attempt_id  TEXT NOT NULL,
        task_id     TEXT NOT NULL,
        trigger     TEXT NOT NULL,            -- initial | fix | retry | reassess | judge
        status      TEXT NOT NULL,            -- running | complete
        passed      INTEGER,
        message     TEXT,
        created_at  TEXT NOT NULL,
        finished_at TEXT
    );
    CREATE INDEX assessments_task ON assessments(task_id);
    CREATE TABLE checks (
        assessment_id TEXT NOT NULL,
        idx           INTEGER NOT NULL,
        task_id       TEXT NOT NULL,
        type          TEXT NOT NULL,
        label         TEXT NOT NULL,
        passed        INTEGER NOT NULL,
        message       TEXT NOT NULL,
        details       TEXT,
        duration      REAL NOT NULL,
        created_at    TEXT NOT NULL,
        PRIMARY KEY (assessment_id, idx)
    );
    CREATE TABLE gates (
        mission_id  TEXT NOT NULL,
        name        TEXT NOT NULL,
        status      TEXT NOT NULL,            -- passed | failed (a passed gate is never re-evaluated)
        reason      TEXT,
        avg_score   REAL,
        evaluated_at TEXT NOT NULL,
        PRIMARY KEY (mission_id, name)
    );
    CREATE TABLE events (
        seq         INTEGER PRIMARY KEY,
        ts          TEXT NOT NULL,
        event       TEXT NOT NULL,
        mission_id  TEXT,
        task_id     TEXT,
        data        TEXT NOT NULL
    );
    CREATE INDEX events_mission ON events(mission_id, seq);
    CREATE TABLE commands (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        kind        TEXT NOT NULL,            -- retry | cancel | approve
        target      TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        status      TEXT NOT NULL DEFAULT 'queued',   -- queued | done | refused
        result      TEXT,
        handled_at  TEXT
    );
    """,
    # v2: assessment panel traces, LLM transcripts, escalation, SLA marks.
    """
    ALTER TABLE tasks ADD COLUMN score REAL;                 -- global score of the passing assessment
    ALTER TABLE tasks ADD COLUMN escalation_level INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN model TEXT;                 -- model override after escalateModel
    ALTER TABLE tasks ADD COLUMN judge_used INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN expectations TEXT;          -- JSON, corrected expectations (judge)
    ALTER TABLE tasks ADD COLUMN approval TEXT;              -- NULL | waiting | granted (sideEffects)
    ALTER TABLE attempts ADD COLUMN model TEXT;
    ALTER TABLE attempts ADD COLUMN outcomes TEXT;           -- JSON list of declared deliverables
    ALTER TABLE attempts ADD COLUMN tokens INTEGER;
    ALTER TABLE attempts ADD COLUMN cost REAL;
    ALTER TABLE checks ADD COLUMN scores TEXT;               -- llm_review: JSON {globalScore, scores}
    ALTER TABLE assessments ADD COLUMN global_score REAL;
    ALTER TABLE assessments ADD COLUMN scores TEXT;          -- JSON [{dimension, score, weight, reasoning}]
    CREATE TABLE transcripts (
        attempt_id  TEXT PRIMARY KEY,
        task_id     TEXT NOT NULL,
        data        TEXT NOT NULL                            -- JSON list of turns (secrets redacted)
    );
    CREATE TABLE reviews (
        assessment_id TEXT NOT NULL,
        check_idx     INTEGER NOT NULL,
        reviewer      INTEGER NOT NULL,                      -- 0, 1, 2 (run 2 of a re-run panel: 3, 4, 5)
        task_id       TEXT NOT NULL,
        model         TEXT NOT NULL,
        ok            INTEGER NOT NULL,
        data          TEXT NOT NULL,                         -- JSON trace: analysis, filesRead, messages, …
        created_at    TEXT NOT NULL,
        PRIMARY KEY (assessment_id, check_idx, reviewer)
    );
    CREATE INDEX reviews_task ON reviews(task_id);
    CREATE TABLE dimensions (
        task_id     TEXT NOT NULL,
        check_idx   INTEGER NOT NULL,
        source      TEXT NOT NULL,                           -- given | generated | default
        data        TEXT NOT NULL,                           -- JSON list of dimensions
        created_at  TEXT NOT NULL,
        PRIMARY KEY (task_id, check_idx)
    );
    CREATE TABLE sla_marks (
        entity_id   TEXT NOT NULL,                           -- mission id or task id
        kind        TEXT NOT NULL,                           -- warning | violated | met
        entity_type TEXT NOT NULL,                           -- mission | task
        mission_id  TEXT NOT NULL,
        data        TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        PRIMARY KEY (entity_id, kind)
    );
    """,
    # v3: sideEffects approval lives in the task's status (awaiting_approval); the column was never read.
    """
    ALTER TABLE tasks DROP COLUMN approval;
    """,
    # v4: an agent that cannot start for a reason a new attempt cannot change (the task fails at once).
    """
    ALTER TABLE attempts ADD COLUMN permanent INTEGER NOT NULL DEFAULT 0;
    """,
    # v5: the node that produced each event; the node a mission's tasks run on (several daemons, PostgreSQL).
    """
    ALTER TABLE events ADD COLUMN node TEXT;
    ALTER TABLE missions ADD COLUMN home TEXT;
    """,
    # v6: facts about the store itself. ``store_id``: its identity, a UUID written once when the table is made
    # (``migrate``), which events.jsonl.pos carries, so a deleted or replaced database is noticed (identity.py).
    """
    CREATE TABLE meta (
        key         TEXT PRIMARY KEY,
        value       TEXT NOT NULL
    );
    """,
    # v7: scheduled missions (polpo.schedules): one row per scheduled mission file.
    SCHEDULES_TABLE.format(T="TEXT", I="INTEGER"),
    # v8: checkpoints, delays and approvals (polpo.engine.holds, people): one row per hold once it is reached;
    # a person's verdict on a task over the judge's (polpo.engine.overrides), kept beside the judge's.
    """
    CREATE TABLE overrides (
        task_id      TEXT PRIMARY KEY,
        mission_id   TEXT NOT NULL,
        passed       INTEGER NOT NULL,        -- the person's verdict
        score        REAL NOT NULL,           -- the person's score, 1..5 (what `polpo labels export` writes)
        judge_passed INTEGER,                 -- the verdict it replaced (the task's status then)
        judge_score  REAL,                    -- the judge's global score then
        attempt_id   TEXT,                    -- the attempt judged (its assessment holds the judge's scores)
        reason       TEXT NOT NULL,
        by_person    TEXT NOT NULL,
        created_at   TEXT NOT NULL
    );
    CREATE TABLE holds (
        mission_id  TEXT NOT NULL,
        kind        TEXT NOT NULL,            -- checkpoint | delay
        name        TEXT NOT NULL,
        status      TEXT NOT NULL,            -- reached | started | released
        at          TEXT NOT NULL,            -- reached or started
        expires_at  TEXT,                     -- a delay's end (stored: a restart keeps it)
        released_at TEXT,
        resumed_by  TEXT,                     -- who resumed a checkpoint
        note        TEXT,
        PRIMARY KEY (mission_id, kind, name)
    );
    """,
    # v9: spend split into input and output tokens, for the agent's turns and for each reviewer and judge, with
    # the reviewer's cost (NULL: its model has no known price) in columns a mission's spend is summed from.
    """
    ALTER TABLE attempts ADD COLUMN tokens_in INTEGER;
    ALTER TABLE attempts ADD COLUMN tokens_out INTEGER;
    ALTER TABLE reviews ADD COLUMN tokens_in INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE reviews ADD COLUMN tokens_out INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE reviews ADD COLUMN cost REAL;
    """,
    # v10: what LLM calls cost, per task, mission, agent-day and daemon-day (budgets: polpo.engine.spend_book).
    """
    CREATE TABLE spend (
        scope       TEXT NOT NULL,                           -- task | mission | agent | daemon
        key         TEXT NOT NULL,                           -- task id, mission id, agent name, '' (daemon)
        period      TEXT NOT NULL,                           -- '' or the UTC day (YYYY-MM-DD) of a daily budget
        mission_id  TEXT,
        tokens_in   INTEGER NOT NULL DEFAULT 0,
        tokens_out  INTEGER NOT NULL DEFAULT 0,
        usd         REAL NOT NULL DEFAULT 0,
        usd_known   INTEGER NOT NULL DEFAULT 1,              -- 0: a call had no known price (usd is a floor)
        calls       INTEGER NOT NULL DEFAULT 0,
        flags       INTEGER NOT NULL DEFAULT 0,              -- 1 budget:warning sent, 2 budget:exceeded sent
        limit_usd   REAL,                                    -- a task's budget raised by `polpo retry --budget`
        limit_tokens INTEGER,
        updated_at  TEXT NOT NULL,
        PRIMARY KEY (scope, key, period)
    );
    CREATE INDEX spend_mission ON spend(mission_id);
    """,
    # v11: reviews of stored work run again under another judge (`polpo rejudge`), kept beside the originals.
    """
    CREATE TABLE rejudgements (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id     TEXT NOT NULL,
        attempt_id  TEXT NOT NULL,
        check_idx   INTEGER NOT NULL,
        setup       TEXT NOT NULL,            -- the judge set-up: its models and a hash of its [judge]
        passed      INTEGER NOT NULL,
        decision    TEXT NOT NULL,            -- pass | fail | person | error
        global_score REAL,
        was_passed  INTEGER,                  -- the stored review's verdict then
        was_score   REAL,
        source      TEXT NOT NULL,            -- workspace | digest: what was judged
        data        TEXT NOT NULL,            -- the review (JSON), as a check row keeps it
        created_at  TEXT NOT NULL
    );
    CREATE INDEX rejudgements_task ON rejudgements(task_id);
    """,
    # v12: a metric's value before its task's first attempt (polpo.engine.baselines): measured once, before the
    # agent starts; every fix and retry of the task is compared with it.
    """
    CREATE TABLE baselines (
        task_id     TEXT NOT NULL,
        check_idx   INTEGER NOT NULL,                        -- the metric's position in the task's expectations
        value       REAL NOT NULL,
        data        TEXT NOT NULL,                           -- JSON {label, command, line, attempt, duration}
        created_at  TEXT NOT NULL,
        PRIMARY KEY (task_id, check_idx)
    );
    """,
    # v13: what waits for a person (polpo.attention): what a task waits for (approval, side_effects, budget, judge,
    # provider; NULL while it does not wait), why a mission file was rejected; which node ran an attempt.
    """
    ALTER TABLE tasks ADD COLUMN waiting_for TEXT;
    ALTER TABLE sources ADD COLUMN reason TEXT;
    ALTER TABLE attempts ADD COLUMN node TEXT;               -- the node that ran it (the mission's timeline)
    """,
    # v14: what agents ask of people (polpo.model.questions): questions and tool calls awaiting approval, each with
    # what the agent needs to go on and what came back; a task counts its questions (Polpo's questionRounds).
    QUESTIONS_TABLE.format(T="TEXT", I="INTEGER") + """
    ALTER TABLE tasks ADD COLUMN questions INTEGER NOT NULL DEFAULT 0;
    """,
    # v15: a daemon whose cost does not grow with its history (see HISTORY_MIGRATION).
    HISTORY_MIGRATION.format(T="TEXT", I="INTEGER"),
]

SCHEMA_VERSION = len(MIGRATIONS)

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA busy_timeout=5000",
    "PRAGMA foreign_keys=ON",
)
