-- 0022: a dashboard session may stand for a person signed in through OpenID Connect ("Sign in
-- with single sign-on", app/api/dashboard/single_sign_on.py) instead of a token. The row keeps
-- who they are (the issuer's subject and username) and the groups their access token named at
-- sign-in; their role bindings are read again on every request, so a binding removed takes
-- effect at once. Exactly one of token, admin token digest and person is set.

ALTER TABLE dashboard_sessions
    ADD COLUMN person_subject text CHECK (length(person_subject) BETWEEN 1 AND 512),
    ADD COLUMN person_username text,
    ADD COLUMN person_groups text[],
    DROP CONSTRAINT dashboard_sessions_one_identity,
    ADD CONSTRAINT dashboard_sessions_one_identity
        CHECK (num_nonnulls(token_id, admin_sha256, person_subject) = 1),
    ADD CONSTRAINT dashboard_sessions_person_whole
        CHECK ((person_subject IS NULL) = (person_username IS NULL)
               AND (person_subject IS NULL) = (person_groups IS NULL));
