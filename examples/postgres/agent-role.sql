-- A database role for an agent on a shared store, whose grants refuse what an agent may
-- never do (docs/ARCHITECTURE.md, "Principals and clearing"; SECURITY.md, "Who may clear
-- what"). Run it as the store's owner, in the store's schema, after `byte-probe store
-- migrate`, with psql:
--
--   psql "$OWNER_URL" -v agent=probe_agent -v schema=public -f agent-role.sql
--
-- The agent then connects as that role (PROBE_DATABASE_URL=postgresql+psycopg://probe_agent@…).
-- It reads everything and writes claims, captures, plans and runs, but the database itself
-- refuses its resolutions other than those evidence makes (rechecked, current_again), and
-- every review decision: whatever the agent runs, even the CLI in its own shell.

\set ON_ERROR_STOP on
SET search_path TO :"schema";

GRANT USAGE ON SCHEMA :"schema" TO :"agent";
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA :"schema" TO :"agent";
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA :"schema" TO :"agent";

-- A decision on a review request is a person's: never the agent role's.
REVOKE INSERT, UPDATE, DELETE ON review_decisions FROM :"agent";
-- Resolutions are immutable rows: the agent may add only those its evidence makes.
REVOKE UPDATE, DELETE ON obligation_resolutions FROM :"agent";
-- Row-level security: every role keeps what it had (the permissive policy), and a
-- restrictive one, for the agent role only, admits just the resolutions evidence makes.
ALTER TABLE obligation_resolutions ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS probe_every_role ON obligation_resolutions;
CREATE POLICY probe_every_role ON obligation_resolutions USING (true) WITH CHECK (true);
DROP POLICY IF EXISTS probe_agent_clears_by_evidence ON obligation_resolutions;
CREATE POLICY probe_agent_clears_by_evidence ON obligation_resolutions AS RESTRICTIVE
    FOR INSERT TO :"agent" WITH CHECK (resolution IN ('rechecked', 'current_again'));
-- Withdrawal and supersession are a person's too.
REVOKE INSERT, UPDATE, DELETE ON claim_tombstones, claim_supersessions FROM :"agent";
-- gc is an administrator's (docs/ARCHITECTURE.md, "Retention and gc"): the agent may not
-- open a gc batch, forge a tombstone (an events floor would expire readers' cursors) or
-- name itself the gc lock's holder.
REVOKE INSERT, UPDATE, DELETE ON gc_token, gc_tombstones, gc_lock FROM :"agent";
