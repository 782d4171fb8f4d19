-- 0008: every change to api_tokens rings aicp_tokens, once per statement.
--
-- Each replica keeps the project tokens it has seen valid in memory (app/store/token_cache.py)
-- and drops them all when it hears this channel: a revocation, a project's tokens deleted with
-- the project (ON DELETE CASCADE fires this trigger too), or any statement an operator runs by
-- hand. NOTIFY is delivered at commit, so a replica never drops its cache before the change is
-- visible to its next read. Inserts need no notification: a new token is in no cache.

CREATE FUNCTION aicp_tokens_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('aicp_tokens', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER api_tokens_changed
    AFTER UPDATE OR DELETE OR TRUNCATE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION aicp_tokens_changed();
