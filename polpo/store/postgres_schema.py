"""The PostgreSQL schema, versioned in a ``schema_version`` table (one row per applied version).

The tables mirror the SQLite schema column for column (``tests`` compare the two), so ``rows.py`` converts
records the same way for both: SQLite INTEGER is BIGINT (flags stay 0/1), REAL is DOUBLE PRECISION, TEXT is
TEXT with the "C" collation, so sorting and comparing (ISO timestamps, ids) is bytewise as in SQLite whatever
the database's default locale is. JSON stays TEXT: stored and returned as written, never re-parsed.

Migrations run in one transaction under a transaction-level advisory lock, so two nodes starting at once do not
race: the second waits, then finds the schema current. Version numbers are PostgreSQL's own (v1 is the SQLite
schema as of its v3); a change to the tables is a new entry here and one in ``schema.py``.

Longer than 400 lines because a shipped migration's text never changes: the file is the schema's history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polpo.store.errors import StoreError
from polpo.store.fencing import FENCE_FUNCTION
from polpo.store.schema import HISTORY_MIGRATION, QUESTIONS_TABLE, SCHEDULES_TABLE

if TYPE_CHECKING:  # asyncpg is an optional extra: imported only when a config names PostgreSQL
    from asyncpg import Connection
    from asyncpg.pool import PoolConnectionProxy

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]

T = 'TEXT COLLATE "C"'
LOCK_KEY = 0x706F6C706F  # b"polpo": the advisory lock every node takes to migrate

MIGRATIONS: list[str] = [
    # v1: the SQLite schema v3.
    f"""
    CREATE TABLE sources (
        path        {T} PRIMARY KEY,
        hash        {T} NOT NULL,
        outcome     {T} NOT NULL,
        mission_id  {T},
        seen_at     {T} NOT NULL
    );
    CREATE TABLE missions (
        id          {T} PRIMARY KEY,
        seq         BIGINT NOT NULL UNIQUE,
        name        {T} NOT NULL,
        source      {T} NOT NULL,
        hash        {T} NOT NULL,
        run         BIGINT NOT NULL,
        spec        {T} NOT NULL,
        workspace   {T} NOT NULL,
        status      {T} NOT NULL,
        reason      {T},
        report      {T},
        warnings    {T} NOT NULL DEFAULT '[]',
        created_at  {T} NOT NULL,
        finished_at {T}
    );
    CREATE INDEX missions_source ON missions(source);
    CREATE TABLE tasks (
        id               {T} PRIMARY KEY,
        mission_id       {T} NOT NULL,
        idx              BIGINT NOT NULL,
        title            {T} NOT NULL,
        agent            {T} NOT NULL,
        status           {T} NOT NULL,
        reason           {T},
        attempts         BIGINT NOT NULL DEFAULT 0,
        retries          BIGINT NOT NULL DEFAULT 0,
        fix_attempts     BIGINT NOT NULL DEFAULT 0,
        total_fixes      BIGINT NOT NULL DEFAULT 0,
        interruptions    BIGINT NOT NULL DEFAULT 0,
        next_kind        {T} NOT NULL DEFAULT 'initial',
        feedback         {T},
        updated_at       {T} NOT NULL,
        started_at       {T},
        finished_at      {T},
        score            DOUBLE PRECISION,
        escalation_level BIGINT NOT NULL DEFAULT 0,
        model            {T},
        judge_used       BIGINT NOT NULL DEFAULT 0,
        expectations     {T}
    );
    CREATE INDEX tasks_mission ON tasks(mission_id, idx);
    CREATE TABLE attempts (
        id            {T} PRIMARY KEY,
        task_id       {T} NOT NULL,
        mission_id    {T} NOT NULL,
        number        BIGINT NOT NULL,
        kind          {T} NOT NULL,
        agent         {T} NOT NULL,
        status        {T} NOT NULL,
        pid           BIGINT,
        pid_ticks     BIGINT,
        exit_code     BIGINT,
        signal        BIGINT,
        timed_out     BIGINT NOT NULL DEFAULT 0,
        error         {T},
        stdout_tail   {T},
        stderr_tail   {T},
        stdout_bytes  BIGINT,
        stderr_bytes  BIGINT,
        duration      DOUBLE PRECISION,
        files         {T},
        prompt        {T},
        verdict       {T},
        started_at    {T} NOT NULL,
        finished_at   {T},
        model         {T},
        outcomes      {T},
        tokens        BIGINT,
        cost          DOUBLE PRECISION
    );
    CREATE INDEX attempts_task ON attempts(task_id, number);
    CREATE TABLE assessments (
        id           {T} PRIMARY KEY,
        attempt_id   {T} NOT NULL,
        task_id      {T} NOT NULL,
        trigger      {T} NOT NULL,
        status       {T} NOT NULL,
        passed       BIGINT,
        message      {T},
        created_at   {T} NOT NULL,
        finished_at  {T},
        global_score DOUBLE PRECISION,
        scores       {T}
    );
    CREATE INDEX assessments_task ON assessments(task_id);
    CREATE TABLE checks (
        assessment_id {T} NOT NULL,
        idx           BIGINT NOT NULL,
        task_id       {T} NOT NULL,
        type          {T} NOT NULL,
        label         {T} NOT NULL,
        passed        BIGINT NOT NULL,
        message       {T} NOT NULL,
        details       {T},
        duration      DOUBLE PRECISION NOT NULL,
        created_at    {T} NOT NULL,
        scores        {T},
        PRIMARY KEY (assessment_id, idx)
    );
    CREATE TABLE gates (
        mission_id   {T} NOT NULL,
        name         {T} NOT NULL,
        status       {T} NOT NULL,
        reason       {T},
        avg_score    DOUBLE PRECISION,
        evaluated_at {T} NOT NULL,
        PRIMARY KEY (mission_id, name)
    );
    -- seq: numbered from event_clock inside the writing transaction (see postgres.py)
    CREATE TABLE events (
        seq         BIGINT PRIMARY KEY,
        ts          {T} NOT NULL,
        event       {T} NOT NULL,
        mission_id  {T},
        task_id     {T},
        data        {T} NOT NULL
    );
    CREATE INDEX events_mission ON events(mission_id, seq);
    -- the last event number of the cluster: one row, whose lock orders every node's commits
    CREATE TABLE event_clock (
        one         BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
        seq         BIGINT NOT NULL
    );
    INSERT INTO event_clock (one, seq) VALUES (TRUE, 0);
    CREATE TABLE commands (
        id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        kind        {T} NOT NULL,
        target      {T} NOT NULL,
        created_at  {T} NOT NULL,
        status      {T} NOT NULL DEFAULT 'queued',
        result      {T},
        handled_at  {T}
    );
    CREATE TABLE transcripts (
        attempt_id  {T} PRIMARY KEY,
        task_id     {T} NOT NULL,
        data        {T} NOT NULL
    );
    CREATE TABLE reviews (
        assessment_id {T} NOT NULL,
        check_idx     BIGINT NOT NULL,
        reviewer      BIGINT NOT NULL,
        task_id       {T} NOT NULL,
        model         {T} NOT NULL,
        ok            BIGINT NOT NULL,
        data          {T} NOT NULL,
        created_at    {T} NOT NULL,
        PRIMARY KEY (assessment_id, check_idx, reviewer)
    );
    CREATE INDEX reviews_task ON reviews(task_id);
    CREATE TABLE dimensions (
        task_id     {T} NOT NULL,
        check_idx   BIGINT NOT NULL,
        source      {T} NOT NULL,
        data        {T} NOT NULL,
        created_at  {T} NOT NULL,
        PRIMARY KEY (task_id, check_idx)
    );
    CREATE TABLE sla_marks (
        entity_id   {T} NOT NULL,
        kind        {T} NOT NULL,
        entity_type {T} NOT NULL,
        mission_id  {T} NOT NULL,
        data        {T} NOT NULL,
        created_at  {T} NOT NULL,
        PRIMARY KEY (entity_id, kind)
    );
    """,
    # v2: the SQLite schema v4.
    """
    ALTER TABLE attempts ADD COLUMN permanent BIGINT NOT NULL DEFAULT 0;
    """,
    # v3: the SQLite schema v5, and the cluster's own tables (polpo.store.cluster): the nodes and their heartbeats, the
    # queue of ready tasks each node claims from.
    f"""
    ALTER TABLE events ADD COLUMN node {T};
    ALTER TABLE missions ADD COLUMN home {T};
    CREATE TABLE nodes (
        name         {T} PRIMARY KEY,
        incarnation  {T} NOT NULL,
        host         {T} NOT NULL,
        pid          BIGINT NOT NULL,
        started_at   TIMESTAMPTZ NOT NULL,
        heartbeat_at TIMESTAMPTZ NOT NULL
    );
    CREATE TABLE claims (
        task_id       {T} PRIMARY KEY,
        mission_id    {T} NOT NULL,
        home          {T},
        prio          DOUBLE PRECISION NOT NULL,
        mseq          BIGINT NOT NULL,
        idx           BIGINT NOT NULL,
        agent_key     {T} NOT NULL,
        agent_limit   BIGINT,
        mission_limit BIGINT,
        node          {T},
        incarnation   {T},
        claimed_at    TIMESTAMPTZ,
        stop          {T}
    );
    CREATE INDEX claims_free ON claims (prio DESC, mseq, idx) WHERE node IS NULL;
    CREATE INDEX claims_held ON claims (node, incarnation) WHERE node IS NOT NULL;
    """,
    # v4: the SQLite schema v6: the store's identity, a UUID written once (what each node's events.jsonl.pos
    # carries: a dropped and recreated database is another store, see polpo.store.identity).
    f"""
    CREATE TABLE meta (
        key         {T} PRIMARY KEY,
        value       {T} NOT NULL
    );
    INSERT INTO meta (key, value) VALUES ('store_id', gen_random_uuid()::text);
    """,
    # v5: the cluster's fence (polpo.store.fencing): a node's transactions go on only while it holds its lease
    # (a leader's also while its session advisory lock, 0x706F6C706F + 1, was held; replaced in v10).
    f"""
    CREATE FUNCTION polpo_fence(p_node text, p_incarnation text, p_lease double precision, p_leader integer)
    RETURNS void LANGUAGE plpgsql AS $fence$
    BEGIN
        PERFORM 1 FROM nodes WHERE name = p_node AND incarnation = p_incarnation
            AND clock_timestamp() - heartbeat_at < make_interval(secs => p_lease) FOR KEY SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'node % (incarnation %) no longer holds its lease: its tasks are being taken over',
                p_node, p_incarnation USING ERRCODE = 'PLF01';
        END IF;
        IF p_leader IS NOT NULL THEN
            PERFORM pg_advisory_xact_lock_shared({LOCK_KEY + 2});
            IF NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = p_leader AND granted
                           AND classid = {(LOCK_KEY + 1) >> 32} AND objid = {(LOCK_KEY + 1) & 0xFFFFFFFF}) THEN
                RAISE EXCEPTION 'node % no longer leads: the connection holding its leader lock is gone',
                    p_node USING ERRCODE = 'PLF02';
            END IF;
        END IF;
    END
    $fence$;
    """,
    # v6: the SQLite schema v7: scheduled missions (polpo.schedules).
    SCHEDULES_TABLE.format(T=T, I="BIGINT"),
    # v7: the SQLite schema v8: checkpoints, delays and approvals (polpo.engine.holds), verdict overrides.
    f"""
    CREATE TABLE overrides (
        task_id      {T} PRIMARY KEY,
        mission_id   {T} NOT NULL,
        passed       BIGINT NOT NULL,
        score        DOUBLE PRECISION NOT NULL,
        judge_passed BIGINT,
        judge_score  DOUBLE PRECISION,
        attempt_id   {T},
        reason       {T} NOT NULL,
        by_person    {T} NOT NULL,
        created_at   {T} NOT NULL
    );
    CREATE TABLE holds (
        mission_id  {T} NOT NULL,
        kind        {T} NOT NULL,
        name        {T} NOT NULL,
        status      {T} NOT NULL,
        at          {T} NOT NULL,
        expires_at  {T},
        released_at {T},
        resumed_by  {T},
        note        {T},
        PRIMARY KEY (mission_id, kind, name)
    );
    """,
    # v8: the SQLite schema v9: spend split into input and output tokens, and each reviewer's cost.
    """
    ALTER TABLE attempts ADD COLUMN tokens_in BIGINT;
    ALTER TABLE attempts ADD COLUMN tokens_out BIGINT;
    ALTER TABLE reviews ADD COLUMN tokens_in BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE reviews ADD COLUMN tokens_out BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE reviews ADD COLUMN cost DOUBLE PRECISION;
    """,
    # v9: the SQLite schema v10: what LLM calls cost, per task, mission, agent-day and daemon-day.
    f"""
    CREATE TABLE spend (
        scope       {T} NOT NULL,
        key         {T} NOT NULL,
        period      {T} NOT NULL,
        mission_id  {T},
        tokens_in   BIGINT NOT NULL DEFAULT 0,
        tokens_out  BIGINT NOT NULL DEFAULT 0,
        usd         DOUBLE PRECISION NOT NULL DEFAULT 0,
        usd_known   BIGINT NOT NULL DEFAULT 1,
        calls       BIGINT NOT NULL DEFAULT 0,
        flags       BIGINT NOT NULL DEFAULT 0,
        limit_usd   DOUBLE PRECISION,
        limit_tokens BIGINT,
        updated_at  {T} NOT NULL,
        PRIMARY KEY (scope, key, period)
    );
    CREATE INDEX spend_mission ON spend (mission_id);
    """,
    # v10: the SQLite schema v11: reviews run again under another judge (`polpo rejudge`).
    f"""
    CREATE TABLE rejudgements (
        id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        task_id     {T} NOT NULL,
        attempt_id  {T} NOT NULL,
        check_idx   BIGINT NOT NULL,
        setup       {T} NOT NULL,
        passed      BIGINT NOT NULL,
        decision    {T} NOT NULL,
        global_score DOUBLE PRECISION,
        was_passed  BIGINT,
        was_score   DOUBLE PRECISION,
        source      {T} NOT NULL,
        data        {T} NOT NULL,
        created_at  {T} NOT NULL
    );
    CREATE INDEX rejudgements_task ON rejudgements (task_id);
    """,
    # v11: the SQLite schema v12: a metric's value before its task's first attempt.
    f"""
    CREATE TABLE baselines (
        task_id     {T} NOT NULL,
        check_idx   BIGINT NOT NULL,
        value       DOUBLE PRECISION NOT NULL,
        data        {T} NOT NULL,
        created_at  {T} NOT NULL,
        PRIMARY KEY (task_id, check_idx)
    );
    """,
    # v12: the SQLite schema v13: what a task waits for from a person, why a mission file was rejected, which node
    # ran an attempt.
    f"""
    ALTER TABLE tasks ADD COLUMN waiting_for {T};
    ALTER TABLE sources ADD COLUMN reason {T};
    ALTER TABLE attempts ADD COLUMN node {T};
    """,
    # v13: the SQLite schema v14: what agents ask of people (questions, tool calls awaiting approval).
    QUESTIONS_TABLE.format(T=T, I="BIGINT") + """
    ALTER TABLE tasks ADD COLUMN questions BIGINT NOT NULL DEFAULT 0;
    """,
    # v14: leadership as a term held by a live incarnation (polpo.store.cluster.leadership), no longer a session
    # lock a half-open connection could keep: the one row names the leader; the fence checks it. Every node must
    # run this polpo: an older one's fence (with the lock's backend) is gone, so its writes fail.
    f"""
    CREATE TABLE leader (
        one          BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
        node         {T} NOT NULL,
        incarnation  {T} NOT NULL,
        term         BIGINT NOT NULL,
        since        TIMESTAMPTZ NOT NULL
    );
    INSERT INTO leader (node, incarnation, term, since) VALUES ('', '', 0, clock_timestamp());
    DROP FUNCTION polpo_fence(text, text, double precision, integer);
    {FENCE_FUNCTION}
    """,
    # v15: the SQLite schema v15: a daemon whose cost does not grow with its history (schema.HISTORY_MIGRATION).
    HISTORY_MIGRATION.format(T=T, I="BIGINT"),
]

SCHEMA_VERSION = len(MIGRATIONS)

_VERSION_TABLE = ("CREATE TABLE IF NOT EXISTS schema_version "
                  "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")


async def migrate(conn: Connection[Any] | PoolConnectionProxy[Any], migrations: list[str] | None = None) -> int:
    """Bring the database to the newest version (all of it or nothing); the version it is at afterwards.

    ``migrations`` replaces :data:`MIGRATIONS` in tests.
    """
    steps = MIGRATIONS if migrations is None else migrations
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
        await conn.execute(_VERSION_TABLE)
        version = int(await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version"))
        if version > len(steps):
            raise StoreError(
                f"the PostgreSQL store is schema version {version}, newer than this polpo ({len(steps)}); "
                "upgrade polpo or point [store] url elsewhere")
        for v in range(version, len(steps)):
            await conn.execute(steps[v])
            await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", v + 1)
    return len(steps)
