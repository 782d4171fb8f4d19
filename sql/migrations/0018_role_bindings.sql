-- 0018: role bindings map a group of the identity provider (the groups claim of an OpenID
-- Connect access token) to a role: platform-admin (no project), or admin, editor or viewer of
-- one project. A person's roles are the union of the bindings of their groups. A binding goes
-- with its project: a project created later under the same name does not inherit it.
-- Their audit rows are events of kind 'role-binding'.

CREATE TABLE role_bindings (
    id          uuid PRIMARY KEY,
    group_name  text NOT NULL CHECK (length(group_name) BETWEEN 1 AND 512),
    role        text NOT NULL CHECK (role IN ('platform-admin', 'admin', 'editor', 'viewer')),
    project_id  uuid REFERENCES projects (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_by  text NOT NULL,
    CONSTRAINT role_bindings_project_iff_project_role
        CHECK ((role = 'platform-admin') = (project_id IS NULL))
);
-- One binding per group and project (and one platform-admin binding per group).
CREATE UNIQUE INDEX role_bindings_one_per_scope
    ON role_bindings (group_name, coalesce(project_id, '00000000-0000-0000-0000-000000000000'));
CREATE INDEX role_bindings_newest_first ON role_bindings (created_at DESC, id DESC);
CREATE INDEX role_bindings_of_project ON role_bindings (project_id);

ALTER TABLE events DROP CONSTRAINT events_kind_known;

ALTER TABLE events
    ADD CONSTRAINT events_kind_known
        CHECK (kind IN ('project', 'pool', 'workload', 'binding', 'token', 'role-binding'));
