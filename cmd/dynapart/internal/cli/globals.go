// Package cli is what the commands of dynapart share: the global flags and the process's stdio
// (Globals, Stdio), DYNAPART_<FLAG> environment variables (BindEnv) and the per-item variables of
// `work --exec` that BindEnv leaves alone (ItemEnv, itemenv.go), exit codes and usage errors
// (exit.go), the DynamoDB and lease clients, logging beside the progress line (logging.go), source
// tables and key schemas (tables.go), the ledger flags of the commands that read a ledger, items
// as plain JSON (items.go) and terminal progress bars (terminal.go).
package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/dynapart/dynapart/lock"
)

// Stdio is what a run of the CLI uses of its process: its stdout, stderr and environment, and the
// HTTP client of its DynamoDB calls; os's in main, buffers, a map and the harness's client in tests.
type Stdio struct {
	Out, Err  io.Writer
	LookupEnv func(string) (string, bool)
	Environ   func() []string // every variable, for misspelt settings (MisspeltEnv); nil: not looked at
	HTTP      aws.HTTPClient  // nil: the AWS SDK's, with a larger idle pool (httpClient)
}

// OSStdio is the process's own stdio and environment.
func OSStdio() Stdio {
	return Stdio{Out: os.Stdout, Err: os.Stderr, LookupEnv: os.LookupEnv, Environ: os.Environ}
}

// Getenv is the value of the environment variable k, "" when unset.
func (s Stdio) Getenv(k string) string {
	v, _ := s.LookupEnv(k)
	return v
}

// Globals are the flags every command shares, and the process's stdio.
type Globals struct {
	Endpoint  string
	Region    string
	LogLevel  string
	LogFormat string
	IO        Stdio
}

// Logger is the logger of --log-level and --log-format on stderr, and the status line it shares.
func (g *Globals) Logger() (*slog.Logger, *StatusLine, error) {
	return newLogger(logSetup{Level: g.LogLevel, Format: g.LogFormat, W: g.IO.Err, Terminal: IsTerminal(g.IO.Err)})
}

// DynamoClient builds a DynamoDB client from the SDK chain, --region and --endpoint.
func (g *Globals) DynamoClient(ctx context.Context) (*dynamodb.Client, error) {
	cfg, err := g.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if g.Endpoint != "" {
			o.BaseEndpoint = aws.String(g.Endpoint)
		}
		checksumOption(o)
	}), nil
}

// StreamsClient builds a DynamoDB Streams client as DynamoClient builds its client (DynamoDB
// Local serves streams on the same endpoint).
func (g *Globals) StreamsClient(ctx context.Context) (*dynamodbstreams.Client, error) {
	cfg, err := g.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	return dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		if g.Endpoint != "" {
			o.BaseEndpoint = aws.String(g.Endpoint)
		}
	}), nil
}

// awsConfig is the SDK configuration of the SDK chain, --region and --endpoint.
func (g *Globals) awsConfig(ctx context.Context) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if g.IO.HTTP == nil {
		opts = append(opts, config.WithHTTPClient(httpClient()))
	}
	if g.Region != "" {
		opts = append(opts, config.WithRegion(g.Region))
	}
	loopback := false
	if g.Endpoint != "" {
		u, err := url.Parse(g.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return aws.Config{}, Usagef("--endpoint %q: want a URL such as http://127.0.0.1:8000", g.Endpoint)
		}
		host := u.Hostname()
		ip := net.ParseIP(host)
		loopback = host == "localhost" || (ip != nil && ip.IsLoopback())
	}
	if loopback && g.IO.Getenv("AWS_ACCESS_KEY_ID") == "" && g.IO.Getenv("AWS_PROFILE") == "" {
		// DynamoDB Local accepts any credentials; do not require a profile for it.
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("dynapart", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("aws config: %w", err)
	}
	if g.IO.HTTP != nil {
		cfg.HTTPClient = g.IO.HTTP // set after loading, which would wrap it for AWS_CA_BUNDLE
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, checkCredentials(ctx, cfg)
}

// LeaseClient makes the lock client of a lease table, which must exist.
func (g *Globals) LeaseClient(ctx context.Context, leaseTable string) (*lock.Client, error) {
	lc, _, err := g.LeaseClientAndDB(ctx, leaseTable)
	return lc, err
}

// LeaseClientAndDB is LeaseClient with the DynamoDB client it made, for reading other tables.
func (g *Globals) LeaseClientAndDB(ctx context.Context, leaseTable string) (*lock.Client, *dynamodb.Client, error) {
	db, err := g.DynamoClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := lock.CheckTable(ctx, db, leaseTable); err != nil {
		return nil, nil, err
	}
	lc, err := lock.New(db, leaseTable)
	return lc, db, err
}
