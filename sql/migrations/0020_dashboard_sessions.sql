-- 0020: sessions of the web dashboard (app/api/sessions.py). A browser that signed in with a
-- token holds only a random session id in an HttpOnly cookie; the row keeps its SHA-256
-- digest, whose token it stands for and the CSRF token its pages send back. A project
-- token's sessions go with the token (a revocation also ends them: the lookup reads the
-- token's state); the platform admin's sessions keep the digest of the admin token they were
-- opened with, so a new admin token ends them.

CREATE TABLE dashboard_sessions (
    id_sha256 bytea PRIMARY KEY,
    token_id uuid REFERENCES api_tokens (id) ON DELETE CASCADE,
    admin_sha256 bytea,
    csrf text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    CONSTRAINT dashboard_sessions_one_identity
        CHECK ((token_id IS NULL) <> (admin_sha256 IS NULL))
);

CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);
