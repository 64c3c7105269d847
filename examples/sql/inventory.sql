-- A small service inventory: teams own services, services have releases,
-- releases are deployed to environments. The views at the end are what
-- agents query; the README's "SQL views" section imports them with
-- `cardex import sql` and queries them through the gateway.
--
--   psql "$DATABASE_URL" -f examples/sql/inventory.sql

CREATE SCHEMA inventory;

CREATE TYPE inventory.tier AS ENUM ('critical', 'standard', 'experimental');
CREATE TYPE inventory.deploy_status AS ENUM ('running', 'superseded', 'rolled_back');

CREATE TABLE inventory.teams (
  id            int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  slug          text NOT NULL UNIQUE,
  name          text NOT NULL,
  oncall_email  text,
  slack_channel text
);
COMMENT ON TABLE inventory.teams IS 'Engineering teams that own services.';
COMMENT ON COLUMN inventory.teams.slug IS 'Short name of the team, as used in chat and tickets.';
COMMENT ON COLUMN inventory.teams.oncall_email IS 'Address that pages whoever is on call for the team.';

CREATE TABLE inventory.services (
  id         int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name       text NOT NULL UNIQUE,
  tier       inventory.tier NOT NULL,
  team_id    int NOT NULL REFERENCES inventory.teams (id),
  repository text
);
COMMENT ON TABLE inventory.services IS 'Services we run, one row per service.';
COMMENT ON COLUMN inventory.services.name IS 'Name of the service, as in its repository and dashboards.';
COMMENT ON COLUMN inventory.services.tier IS 'How critical the service is: critical services page at night.';

CREATE TABLE inventory.environments (
  id     int PRIMARY KEY,
  name   text NOT NULL UNIQUE,
  region text NOT NULL
);
COMMENT ON COLUMN inventory.environments.name IS 'Environment name: production, staging.';
COMMENT ON COLUMN inventory.environments.region IS 'Cloud region the environment runs in.';

CREATE TABLE inventory.releases (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  service_id int NOT NULL REFERENCES inventory.services (id),
  version    text NOT NULL,
  commit_sha bytea NOT NULL,
  built_at   timestamptz NOT NULL,
  changelog  jsonb,
  UNIQUE (service_id, version)
);
COMMENT ON COLUMN inventory.releases.version IS 'Release version, semantic versioning.';

CREATE TABLE inventory.deployments (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  release_id     bigint NOT NULL REFERENCES inventory.releases (id),
  environment_id int NOT NULL REFERENCES inventory.environments (id),
  status         inventory.deploy_status NOT NULL,
  replicas       int NOT NULL,
  cpu_cores      numeric(6,2) NOT NULL,
  started_at     timestamptz NOT NULL,
  finished_at    timestamptz
);
COMMENT ON COLUMN inventory.deployments.cpu_cores IS 'CPU cores requested by all replicas together.';

INSERT INTO inventory.teams (slug, name, oncall_email, slack_channel) VALUES
  ('payments', 'Payments', 'payments-oncall@example.com', '#payments'),
  ('search', 'Search', 'search-oncall@example.com', '#search'),
  ('platform', 'Platform', NULL, '#platform');
INSERT INTO inventory.services (name, tier, team_id, repository) VALUES
  ('checkout', 'critical', 1, 'github.com/example/checkout'),
  ('invoices', 'standard', 1, 'github.com/example/invoices'),
  ('search-api', 'critical', 2, 'github.com/example/search-api'),
  ('feature-flags', 'experimental', 3, NULL);
INSERT INTO inventory.environments VALUES (1, 'production', 'eu-west-1'), (2, 'staging', 'eu-west-1'), (3, 'production-us', 'us-east-1');
INSERT INTO inventory.releases (service_id, version, commit_sha, built_at, changelog) VALUES
  (1, '4.2.0', '\x9f2c41aa', '2025-02-20 09:30:00+00', '{"changes": ["3-D Secure 2 for cards"]}'),
  (1, '4.3.0', '\x0b7e5d13', '2025-03-03 14:05:00+00', '{"changes": ["Apple Pay"], "breaking": false}'),
  (2, '1.9.1', '\x44aa0c2e', '2025-02-28 11:00:00+00', NULL),
  (3, '2.0.0', '\xe1f00d42', '2025-03-01 08:15:00+00', '{"changes": ["new ranking"], "breaking": true}'),
  (4, '0.3.0', '\x5151aaaa', '2025-03-02 17:45:00+00', NULL);
INSERT INTO inventory.deployments (release_id, environment_id, status, replicas, cpu_cores, started_at, finished_at) VALUES
  (1, 1, 'superseded', 6, 12.00, '2025-02-21 10:00:00+00', '2025-03-04 09:00:00+00'),
  (2, 1, 'running', 8, 16.00, '2025-03-04 09:00:00+00', NULL),
  (2, 2, 'running', 2, 2.50, '2025-03-03 15:00:00+00', NULL),
  (3, 1, 'running', 3, 1.50, '2025-03-01 10:00:00+00', NULL),
  (4, 1, 'rolled_back', 4, 8.00, '2025-03-01 09:00:00+00', '2025-03-01 09:20:00+00'),
  (4, 2, 'running', 1, 2.00, '2025-03-01 08:30:00+00', NULL),
  (5, 3, 'running', 2, 0.50, '2025-03-02 18:00:00+00', NULL);

CREATE VIEW inventory.running_releases AS
  SELECT s.name AS service, e.name AS environment, e.region, r.version, d.replicas, d.cpu_cores,
         d.started_at AS deployed_at, r.changelog
  FROM inventory.deployments d
  JOIN inventory.releases r ON r.id = d.release_id
  JOIN inventory.services s ON s.id = r.service_id
  JOIN inventory.environments e ON e.id = d.environment_id
  WHERE d.status = 'running';
COMMENT ON VIEW inventory.running_releases IS
  'Releases currently running: one row per service and environment, with the version deployed there and since when.';
COMMENT ON COLUMN inventory.running_releases.deployed_at IS 'When this release started running in the environment.';
COMMENT ON COLUMN inventory.running_releases.changelog IS 'What changed in the release, as JSON: {"changes": [...], "breaking": bool}.';

CREATE VIEW inventory.service_owners AS
  SELECT s.name AS service, s.tier, t.slug AS team, t.name AS team_name, t.oncall_email, t.slack_channel
  FROM inventory.services s
  JOIN inventory.teams t ON t.id = s.team_id;
COMMENT ON VIEW inventory.service_owners IS
  'Who owns each service: one row per service, with its owning team, the team''s on-call address and Slack channel.';

CREATE MATERIALIZED VIEW inventory.release_counts AS
  SELECT s.name AS service, count(*) AS releases, max(r.built_at) AS last_built_at
  FROM inventory.releases r
  JOIN inventory.services s ON s.id = r.service_id
  GROUP BY s.name;
CREATE UNIQUE INDEX release_counts_service ON inventory.release_counts (service);
COMMENT ON MATERIALIZED VIEW inventory.release_counts IS
  'How many releases each service has had, and when its latest was built. Refreshed nightly.';

-- No comment on purpose: `cardex cards lint` points it out.
CREATE VIEW inventory.deployment_history AS
  SELECT id, release_id, environment_id, status, replicas, started_at, finished_at
  FROM inventory.deployments;
