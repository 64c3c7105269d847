# shellcheck shell=bash
# Sourced by scripts/test: starts the test databases in the background and
# exports their URLs. Stop them with testdb_stop (scripts/test traps EXIT).
#
#   CARDEX_TEST_DATABASE_URL  PostgreSQL with pgvector: PGlite (npm, pinned by
#                             package-lock.json) on a free loopback port,
#                             simple protocol (its connections share one session)
#   CARDEX_TEST_BULK_DATABASE_URL
#                             a second PGlite for the 10,000-card tests, whose
#                             bulk loads and index builds would otherwise stall
#                             the timing-sensitive tests (PGlite runs one
#                             statement at a time)
#   CARDEX_TEST_NATIVE_PG_URL native PostgreSQL 15 (initdb + pg_ctl in a temp
#                             dir) for real sessions and LISTEN/NOTIFY
#
# A URL that is already set is used as it is and nothing is started for it
# (e.g. the docker-compose PostgreSQL).

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
TESTDB_DIR=""
PGLITE_PID=""
PGLITE_BULK_PID=""
NATIVE_PG_DATA=""

testdb_free_port() {
	node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# testdb_npm_ci installs the npm packages of package-lock.json (PGlite, and
# the TypeScript client's and examples' packages of the npm workspaces) when
# node_modules does not match it.
testdb_npm_ci() {
	if ! command -v npm >/dev/null; then return; fi
	if ! cmp -s package-lock.json node_modules/.cardex-package-lock.json 2>/dev/null; then
		echo "scripts/test: installing the npm packages (npm ci)" >&2
		npm ci --no-audit --no-fund --loglevel=error >&2
		cp package-lock.json node_modules/.cardex-package-lock.json
	fi
}

testdb_start_pglite() {
	if [ -n "${CARDEX_TEST_DATABASE_URL:-}" ]; then return; fi
	if ! command -v node >/dev/null; then
		echo "scripts/test: node is needed for PGlite (apt-get install nodejs npm)" >&2
		exit 1
	fi
	testdb_npm_ci
	PGLITE_PORT=$(testdb_free_port)
	testdb_pglite_server "$PGLITE_PORT" pglite
	PGLITE_PID=$!
	if [ -z "${CARDEX_TEST_BULK_DATABASE_URL:-}" ]; then
		PGLITE_BULK_PORT=$(testdb_free_port)
		testdb_pglite_server "$PGLITE_BULK_PORT" pglite-bulk
		PGLITE_BULK_PID=$!
	fi
}

testdb_pglite_server() {
	node node_modules/@electric-sql/pglite-socket/dist/scripts/server.js \
		-h 127.0.0.1 -p "$1" -e @electric-sql/pglite-pgvector:vector -m 64 \
		>"$TESTDB_DIR/$2.log" 2>&1 &
}

# testdb_wait_for NAME PID PORT: waits until that PGlite listens.
testdb_wait_for() {
	local i
	for i in $(seq 1 1200); do
		if grep -q "listening" "$TESTDB_DIR/$1.log" 2>/dev/null; then
			echo "scripts/test: $1 (PostgreSQL + pgvector) on 127.0.0.1:$3 after $((i / 10)).$((i % 10))s" >&2
			return
		fi
		if ! kill -0 "$2" 2>/dev/null; then break; fi
		sleep 0.1
	done
	echo "scripts/test: $1 did not start:" >&2
	cat "$TESTDB_DIR/$1.log" >&2
	exit 1
}

testdb_wait_pglite() {
	local q="sslmode=disable&default_query_exec_mode=simple_protocol"
	if [ -n "$PGLITE_PID" ]; then
		testdb_wait_for pglite "$PGLITE_PID" "$PGLITE_PORT"
		export CARDEX_TEST_DATABASE_URL="postgres://postgres:postgres@127.0.0.1:$PGLITE_PORT/postgres?$q"
	fi
	if [ -n "$PGLITE_BULK_PID" ]; then
		testdb_wait_for pglite-bulk "$PGLITE_BULK_PID" "$PGLITE_BULK_PORT"
		export CARDEX_TEST_BULK_DATABASE_URL="postgres://postgres:postgres@127.0.0.1:$PGLITE_BULK_PORT/postgres?$q"
	fi
}

# as_pg runs a PostgreSQL server binary: initdb and postgres refuse to run
# as root, so as root they run as the postgres user.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

testdb_start_native() {
	if [ -n "${CARDEX_TEST_NATIVE_PG_URL:-}" ]; then return; fi
	if [ ! -x "$PG_BIN/initdb" ]; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			echo "scripts/test: installing postgresql-15 (for the LISTEN/NOTIFY test)" >&2
			DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 >&2
		else
			echo "scripts/test: $PG_BIN/initdb not found: install PostgreSQL 15 (apt-get install postgresql-15)" >&2
			exit 1
		fi
	fi
	if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
		useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
	fi
	NATIVE_PG_DATA="$TESTDB_DIR/native"
	mkdir -p "$NATIVE_PG_DATA"
	if [ "$(id -u)" = 0 ]; then chown postgres "$NATIVE_PG_DATA"; chmod 755 "$TESTDB_DIR"; fi
	local port
	port=$(testdb_free_port)
	as_pg "$PG_BIN/initdb" -D "$NATIVE_PG_DATA/data" -U postgres -A trust --no-sync -E UTF8 --locale=C >"$TESTDB_DIR/initdb.log" 2>&1 ||
		{ cat "$TESTDB_DIR/initdb.log" >&2; exit 1; }
	as_pg "$PG_BIN/pg_ctl" -D "$NATIVE_PG_DATA/data" -l "$NATIVE_PG_DATA/log" -w -t 60 \
		-o "-p $port -k $NATIVE_PG_DATA -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null ||
		{ cat "$NATIVE_PG_DATA/log" >&2; exit 1; }
	export CARDEX_TEST_NATIVE_PG_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	echo "scripts/test: native PostgreSQL 15 on 127.0.0.1:$port" >&2
}

# testdb_installs prints, one a line, what testdb_start would install:
# the npm packages of package-lock.json (PGlite) when node_modules does not
# match it, PostgreSQL 15 when it is missing (installed only as root).
testdb_installs() {
	if command -v npm >/dev/null && ! cmp -s package-lock.json node_modules/.cardex-package-lock.json 2>/dev/null; then
		echo "the npm packages of package-lock.json: PGlite and its pgvector extension, the TypeScript client's and examples' packages (npm ci into ./node_modules)"
	fi
	if [ -z "${CARDEX_TEST_NATIVE_PG_URL:-}" ] && [ ! -x "$PG_BIN/initdb" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "PostgreSQL 15 (apt-get install postgresql-15)"
	fi
}

testdb_start() {
	TESTDB_DIR=$(mktemp -d -t cardex-testdb.XXXXXX)
	testdb_npm_ci
	testdb_start_pglite
	testdb_start_native
}

testdb_stop() {
	local pid
	for pid in $PGLITE_PID $PGLITE_BULK_PID; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [ -n "$NATIVE_PG_DATA" ] && [ -d "$NATIVE_PG_DATA/data" ]; then
		as_pg "$PG_BIN/pg_ctl" -D "$NATIVE_PG_DATA/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	if [ -n "$TESTDB_DIR" ]; then rm -rf "$TESTDB_DIR"; fi
}
