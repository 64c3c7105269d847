package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BackendCPU is the CPU time (user and system) of the client backends of
// the PostgreSQL server that pool is connected to, read from /proc: a native
// server on this machine. Benchmarks report the server's CPU per operation
// as the difference of two readings. False when it cannot be read (a server
// elsewhere, PGlite).
func BackendCPU(ctx context.Context, pool *pgxpool.Pool) (time.Duration, bool) {
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'`)
	if err != nil {
		return 0, false
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, false
	}
	var ticks int64
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, false
		}
		// The fields after the command's closing parenthesis; utime and
		// stime are the 14th and 15th of the line, in clock ticks.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		for _, x := range f[11:13] {
			v, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return 0, false
			}
			ticks += v
		}
	}
	return time.Duration(ticks) * (time.Second / 100), true // USER_HZ is 100 on Linux
}
