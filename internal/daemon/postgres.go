package daemon

import (
	"flag"
	"time"

	"github.com/svrp/svrp/store/postgres"
)

// defaultStatementTimeout bounds one statement on PostgreSQL: far above what any of the
// registry's statements takes on a healthy server, so that it only ends a statement stuck
// behind a lock or an overloaded server, which the client is then told to retry (503).
const defaultStatementTimeout = 10 * time.Second

// postgresFlags registers the flags of the PostgreSQL store's connections.
func postgresFlags(fs *flag.FlagSet, c *Config) {
	fs.IntVar(&c.PostgresPoolSize, "postgres-pool-size", 0, "most connections to PostgreSQL this daemon opens (0: the larger of 4 and the number of CPUs); the server's max_connections must cover every daemon's")
	fs.DurationVar(&c.PostgresStatementTimeout, "postgres-statement-timeout", defaultStatementTimeout, "the server cancels a statement that runs longer (statement_timeout), and the request is answered 503 STORE_UNAVAILABLE; 0 for no bound")
}

// postgresOptions are the store options the flags ask for.
func (c Config) postgresOptions() []postgres.Option {
	return []postgres.Option{
		postgres.WithPoolSize(c.PostgresPoolSize),
		postgres.WithStatementTimeout(c.PostgresStatementTimeout),
	}
}
