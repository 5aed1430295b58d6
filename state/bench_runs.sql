-- The bench runs of `fleet bench` and of the promote gate (issue #47) on the
-- PostgreSQL state backend: one row per run, every run kept, beside the
-- `events` table (which keeps a `bench` event per run as well, for `fleet
-- events`). Embedded in fleet at build time (state/meson.build,
-- src/probe/embed_source.py: kBenchRunsSql) and run on first use, as the
-- events table is: a schema made by an older fleet gets it on its first
-- bench run. {schema} is the manifest's schema, quoted as an identifier.
-- Idempotent: every statement is IF NOT EXISTS.
CREATE TABLE IF NOT EXISTS {schema}.bench_runs (
  id bigserial PRIMARY KEY,
  run_id text NOT NULL UNIQUE,           -- "<date>_<spec12>", as reports/ names it
  time timestamptz NOT NULL,             -- when the run started
  deployment text NOT NULL,
  node text NOT NULL,                    -- the node benched (a gate's candidate, say)
  profile text NOT NULL,
  outcome text NOT NULL,                 -- recorded, ok, regressed, gate baseline/passed/refused
  image text NOT NULL,                   -- the spec: repo@sha256:...
  model_revision text NOT NULL,
  spec_hash text NOT NULL,
  record jsonb NOT NULL                  -- the whole run: cells, quality, harness, spec
);
CREATE INDEX IF NOT EXISTS bench_runs_deployment ON {schema}.bench_runs (deployment, time);
CREATE INDEX IF NOT EXISTS bench_runs_spec ON {schema}.bench_runs (spec_hash);
