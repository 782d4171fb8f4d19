-- 0011: which token minted which, so that revoking a token revokes the tokens it minted.
--
-- A token created with a project token has `minted_by` = that token (NULL: the platform admin
-- minted it). app/store/tokens.py revokes a token and every descendant in one statement (a
-- recursive walk of this column); the trigger of 0008 then rings aicp_tokens once, and every
-- replica drops its token cache. Tokens minted before this migration get their minter back
-- from `created_by` ('token:<id>'), where that token still exists.

ALTER TABLE api_tokens ADD COLUMN minted_by uuid REFERENCES api_tokens (id) ON DELETE CASCADE;
CREATE INDEX api_tokens_by_minter ON api_tokens (minted_by) WHERE minted_by IS NOT NULL;

UPDATE api_tokens AS child
SET minted_by = parent.id
FROM api_tokens AS parent
WHERE child.created_by = 'token:' || parent.id::text;
