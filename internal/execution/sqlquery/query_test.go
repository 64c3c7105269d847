package sqlquery_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

// database is one of the two real PostgreSQL servers the tests run on.
type database struct {
	name   string
	url    func(testing.TB) string
	native bool // real sessions and a working statement_timeout
}

var databases = []database{
	{"pglite", pgtest.URL, false},
	{"native", pgtest.NativeURL, true},
}

// schema creates a schema of its own on the database, dropped at the end.
func schema(t *testing.T, url, ddl string) string {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	s := "i12q_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+s+" CASCADE")
		c.Close(context.Background())
	})
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+s+"; SET LOCAL search_path = "+s+"; "+strings.ReplaceAll(ddl, "S.", s+".")); err != nil {
		t.Fatalf("schema: %v", err)
	}
	return s
}

const things = `
CREATE TYPE S.mood AS ENUM ('calm', 'busy');
CREATE DOMAIN S.qty AS int CHECK (VALUE >= 0);
CREATE TABLE S.things (
  id int8 PRIMARY KEY, name text NOT NULL, price numeric(10,2), ratio float8, ok bool, doc jsonb, raw bytea,
  at timestamptz, local timestamp, day date, tags text[], mood S.mood, moods S.mood[], stock S.qty, span interval, uid uuid);
INSERT INTO S.things VALUES
  (1, 'bolt "M6"', 0.25, 0.5, true, '{"size": [6, 1.0]}', '\x00ff', '2025-03-01 12:00:00.5+02', '2025-03-01 12:00:00', '2025-03-01',
   '{"a,b",NULL}', 'busy', '{calm,busy}', 7, '1 day 2 hours', '6ecd8c99-4036-403d-bf84-cf8400f67836'),
  (2, 'nut', NULL, 'NaN', false, 'null', NULL, NULL, NULL, NULL, '{}', NULL, NULL, NULL, NULL, NULL);
CREATE SEQUENCE S.seq;
`

func pools(t *testing.T, url string, sql upstream.SQL) *sqlquery.Pools {
	t.Helper()
	sql.DatabaseURL = url
	cfg := upstream.Config{Upstreams: []upstream.Upstream{{Server: "inv", SQL: &sql}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := sqlquery.New(cfg, nil)
	t.Cleanup(p.Close)
	return p
}

func query(t *testing.T, p *sqlquery.Pools, args string) (sqlquery.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return p.Query(ctx, "acme", "inv", json.RawMessage(args))
}

func argsJSON(sql string, params map[string]any) string {
	b, _ := json.Marshal(map[string]any{"sql": sql, "params": params})
	return string(b)
}

func TestQuery(t *testing.T) {
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			url := db.url(t)
			s := schema(t, url, things)
			p := pools(t, url, upstream.SQL{MaxRows: 3, Reserved: map[string]upstream.ParamValue{"region": "eu"}})

			// Every value in its JSON form.
			res, err := query(t, p, argsJSON("SELECT * FROM "+s+".things ORDER BY id", nil))
			if err != nil {
				t.Fatal(err)
			}
			want := `[{"id":1,"name":"bolt \"M6\"","price":0.25,"ratio":0.5,"ok":true,"doc":{"size":[6,1.0]},"raw":"AP8=",` +
				`"at":"2025-03-01T10:00:00.5Z","local":"2025-03-01T12:00:00","day":"2025-03-01","tags":["a,b",null],"mood":"busy",` +
				`"moods":["calm","busy"],"stock":7,"span":"P1DT2H","uid":"6ecd8c99-4036-403d-bf84-cf8400f67836"},` +
				`{"id":2,"name":"nut","price":null,"ratio":"NaN","ok":false,"doc":null,"raw":null,"at":null,"local":null,"day":null,` +
				`"tags":[],"mood":null,"moods":null,"stock":null,"span":null,"uid":null}]`
			if string(res.Rows) != want || !res.Complete || res.RowCount != 2 || len(res.Columns) != 16 {
				t.Fatalf("rows:\n%s\nwant\n%s\n%+v", res.Rows, want, res)
			}

			// Parameters are values, never text of the query; reserved ones come from the connection.
			res, err = query(t, p, argsJSON("SELECT name, :region AS region, :n::numeric + 1 AS n FROM "+s+".things WHERE name = :name OR id = :id",
				map[string]any{"name": "x' OR '1'='1", "id": 2, "n": 1.5}))
			if err != nil || string(res.Rows) != `[{"name":"nut","region":"eu","n":2.5}]` {
				t.Fatalf("params: %v %s", err, res.Rows)
			}

			// The row limit: a partial result that says so.
			res, err = query(t, p, argsJSON("SELECT g FROM generate_series(1, 10) g", nil))
			if err != nil || res.Complete || res.IncompleteReason != sqlquery.IncompleteRowLimit || res.RowCount != 3 || string(res.Rows) != `[{"g":1},{"g":2},{"g":3}]` {
				t.Fatalf("row limit: %v %+v %s", err, res, res.Rows)
			}
			res, err = query(t, p, argsJSON("SELECT g FROM generate_series(1, 3) g", nil))
			if err != nil || !res.Complete || res.RowCount != 3 {
				t.Fatalf("exactly the limit is complete: %v %+v", err, res)
			}
			if got := string(res.JSON()); got != `{"columns":["g"],"rows":[{"g":1},{"g":2},{"g":3}],"row_count":3,"complete":true}` {
				t.Fatalf("JSON: %s", got)
			}

			// The byte limit.
			pb := pools(t, url, upstream.SQL{MaxBytes: 60})
			res, err = query(t, pb, argsJSON("SELECT repeat('x', 20) AS s FROM generate_series(1, 10)", nil))
			if err != nil || res.Complete || res.IncompleteReason != sqlquery.IncompleteByteLimit || res.RowCount != 2 || len(res.Rows) > 60 {
				t.Fatalf("byte limit: %v %+v %s", err, res, res.Rows)
			}

			// Refusals: nothing written, whatever the route.
			for _, tc := range []struct{ args, reason, msg string }{
				{argsJSON("DELETE FROM "+s+".things", nil), sqlquery.RefusedStatement, "only a SELECT or WITH"},
				{argsJSON("SELECT 1; DELETE FROM "+s+".things", nil), sqlquery.RefusedStatement, "more than one statement"},
				{argsJSON("WITH d AS (DELETE FROM "+s+".things RETURNING id) SELECT * FROM d", nil), sqlquery.RefusedStatement, "tried to write"},
				{argsJSON("SELECT nextval('"+s+".seq')", nil), sqlquery.RefusedStatement, "tried to write"},
				{argsJSON("SELECT * FROM "+s+".things FOR UPDATE", nil), sqlquery.RefusedStatement, "tried to write"},
				{argsJSON("SELECT * INTO "+s+".copy FROM "+s+".things", nil), "", ""},
				{argsJSON("SELECT :region", map[string]any{"region": "us"}), sqlquery.RefusedReserved, "reserved"},
			} {
				_, err := query(t, p, tc.args)
				var r *sqlquery.Refusal
				var se *sqlquery.SQLError
				switch {
				case tc.reason == "" && errors.As(err, &se): // SELECT INTO is not a cursor's query: the database says so
				case tc.reason != "" && errors.As(err, &r) && r.Reason == tc.reason && strings.Contains(r.Message, tc.msg):
				default:
					t.Errorf("%s: %v, want a %s refusal mentioning %q", tc.args, err, tc.reason, tc.msg)
				}
			}
			res, err = query(t, p, argsJSON("SELECT count(*) AS n, (SELECT count(*) FROM pg_class WHERE relname = 'copy' AND relnamespace = '"+s+"'::regnamespace) AS copies FROM "+s+".things", nil))
			if err != nil || string(res.Rows) != `[{"n":2,"copies":0}]` {
				t.Fatalf("after the refusals: %v %s", err, res.Rows)
			}

			// Errors are the database's.
			_, err = query(t, p, argsJSON("SELECT nope FROM "+s+".things", nil))
			var se *sqlquery.SQLError
			if !errors.As(err, &se) || se.Code != "42703" || !strings.Contains(se.Error(), `column "nope" does not exist`) {
				t.Fatalf("sql error: %v", err)
			}
			_, err = query(t, p, argsJSON("SELECT 1 AS a, 2 AS a", nil))
			if !errors.As(err, &se) || !strings.Contains(se.Message, `two columns named "a"`) {
				t.Fatalf("duplicate columns: %v", err)
			}

			// A session setting changed by a query does not outlive it.
			p1 := pools(t, url, upstream.SQL{MaxConns: 1})
			if _, err := query(t, p1, argsJSON("SELECT set_config('search_path', 'nowhere', false)", nil)); err != nil {
				t.Fatal(err)
			}
			res, err = query(t, p1, argsJSON("SELECT current_setting('search_path') <> 'nowhere' AS reset, current_setting('transaction_read_only') AS ro", nil))
			if err != nil || string(res.Rows) != `[{"reset":true,"ro":"on"}]` {
				t.Fatalf("settings: %v %s", err, res.Rows)
			}
		})
	}
}

// TestQueryTimeout needs real sessions: PGlite does not enforce
// statement_timeout, and a long statement there would hold up every other
// test's connection.
func TestQueryTimeout(t *testing.T) {
	url := pgtest.NativeURL(t)
	p := pools(t, url, upstream.SQL{StatementTimeout: upstream.Duration(time.Second)})
	start := time.Now()
	// Rows come in batches of 100: the timeout in the third keeps the first two.
	res, err := query(t, p, argsJSON("SELECT g, pg_sleep(CASE WHEN g > 250 THEN 30 ELSE 0 END) IS NULL AS slept FROM generate_series(1, 300) g", nil))
	if err != nil || res.Complete || res.IncompleteReason != sqlquery.IncompleteTimeout || res.RowCount != 200 {
		t.Fatalf("timeout: %v %+v", err, res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the statement ran %v past its 1s timeout", d)
	}
	// A session-level advisory lock taken by a query is released with it.
	if _, err := query(t, p, argsJSON("SELECT pg_advisory_lock(4242) IS NULL AS locked", nil)); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var free bool
	if err := c.QueryRow(context.Background(), "SELECT pg_try_advisory_lock(4242)").Scan(&free); err != nil || !free {
		t.Fatalf("the advisory lock outlived the query: %v %v", free, err)
	}
	_, _ = c.Exec(context.Background(), "SELECT pg_advisory_unlock(4242)")
}

// TestUnreachable: a database that is not there is an upstream failure, and
// the error does not repeat the URL (it may hold a password).
func TestUnreachable(t *testing.T) {
	p := pools(t, "postgres://reader:s3cret@127.0.0.1:1/db?connect_timeout=2", upstream.SQL{})
	_, err := query(t, p, argsJSON("SELECT 1", nil))
	var ce *upstream.CallError
	if !errors.As(err, &ce) || ce.Kind != upstream.KindUnreachable || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("%v", err)
	}
}

// TestConcurrentQueries: queries share a pool and its type cache (native
// PostgreSQL: real concurrent sessions; run with -race).
func TestConcurrentQueries(t *testing.T) {
	url := pgtest.NativeURL(t)
	s := schema(t, url, things)
	p := pools(t, url, upstream.SQL{MaxConns: 4})
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			sql := "SELECT mood, moods, stock FROM " + s + ".things WHERE id = :id"
			res, err := p.Query(context.Background(), "acme", "inv", json.RawMessage(argsJSON(sql, map[string]any{"id": 1 + i%2})))
			if err == nil && !strings.HasPrefix(string(res.Rows), `[{"mood":`) {
				err = errors.New(string(res.Rows))
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestByteLimitBoundsMemory: max_bytes bounds what a query holds in memory
// while the rows stream in, not only what it answers. A 48 MB value (the
// review's SELECT repeat('x', 120000000) took the server from 73 to 727 MB)
// is cut at the byte limit without being read whole: the bytes the process
// allocates for the query stay a small multiple of max_bytes. Rows before
// it are kept, and the connection is not reused in an unknown state. Native
// PostgreSQL only: PGlite's one shared session stalls for 15 s after a
// client drops a result half-read, which would stall every other test.
func TestByteLimitBoundsMemory(t *testing.T) {
	for _, db := range databases {
		if !db.native {
			continue
		}
		t.Run(db.name, func(t *testing.T) {
			url := db.url(t)
			const maxBytes = 1 << 20
			p := pools(t, url, upstream.SQL{MaxBytes: maxBytes, MaxConns: 1})
			for _, sql := range []string{
				"SELECT repeat('x', 48000000) AS s",
				"SELECT g, CASE WHEN g = 3 THEN repeat('y', 48000000) ELSE 'small' END AS s FROM generate_series(1, 5) g",
				"SELECT repeat(E'\\x01', 900000) AS s", // fits as text, not as escaped JSON
			} {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				res, err := query(t, p, argsJSON(sql, nil))
				runtime.ReadMemStats(&after)
				if err != nil || res.Complete || res.IncompleteReason != sqlquery.IncompleteByteLimit || len(res.Rows) > maxBytes {
					t.Fatalf("%s: %v %+v", sql, err, res)
				}
				if strings.Contains(sql, "generate_series") && res.RowCount != 2 {
					t.Errorf("%s: %d rows kept, want the 2 before the large one", sql, res.RowCount)
				}
				alloc := after.TotalAlloc - before.TotalAlloc
				t.Logf("%s: %d rows, %.1f MB allocated", sql, res.RowCount, float64(alloc)/(1<<20))
				if alloc > 16*maxBytes {
					t.Errorf("%s: the query allocated %d MB for a max_bytes of %d MB", sql, alloc>>20, maxBytes>>20)
				}

			}
			// The pool's one connection still answers.
			if res, err := query(t, p, argsJSON("SELECT 1 AS one", nil)); err != nil || string(res.Rows) != `[{"one":1}]` {
				t.Fatalf("after the cut: %v %s", err, res.Rows)
			}
		})
	}
}
