package main

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

	"github.com/dynapart/dynapart/lock"
)

// stdio is what a run of the CLI uses of its process: its stdout, stderr and environment, and the
// HTTP client of its DynamoDB calls; os's in main, buffers, a map and the harness's client in tests.
type stdio struct {
	out, err  io.Writer
	lookupEnv func(string) (string, bool)
	http      aws.HTTPClient // nil: the AWS SDK's
}

func osStdio() stdio { return stdio{out: os.Stdout, err: os.Stderr, lookupEnv: os.LookupEnv} }

func (s stdio) getenv(k string) string {
	v, _ := s.lookupEnv(k)
	return v
}

// globals are the flags every command shares, and the process's stdio.
type globals struct {
	endpoint  string
	region    string
	logLevel  string
	logFormat string
	io        stdio
}

// logger is the logger of --log-level and --log-format on stderr, and the status line it shares.
func (g *globals) logger() (*slog.Logger, *statusLine, error) {
	return newLogger(logSetup{Level: g.logLevel, Format: g.logFormat, W: g.io.err, Terminal: isTerminal(g.io.err)})
}

// dynamoClient builds a DynamoDB client from the SDK chain, --region and --endpoint.
func (g *globals) dynamoClient(ctx context.Context) (*dynamodb.Client, error) {
	var opts []func(*config.LoadOptions) error
	if g.region != "" {
		opts = append(opts, config.WithRegion(g.region))
	}
	loopback := false
	if g.endpoint != "" {
		u, err := url.Parse(g.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("--endpoint %q: want a URL such as http://127.0.0.1:8000", g.endpoint)
		}
		host := u.Hostname()
		ip := net.ParseIP(host)
		loopback = host == "localhost" || (ip != nil && ip.IsLoopback())
	}
	if loopback && g.io.getenv("AWS_ACCESS_KEY_ID") == "" && g.io.getenv("AWS_PROFILE") == "" {
		// DynamoDB Local accepts any credentials; do not require a profile for it.
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("dynapart", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	if g.io.http != nil {
		cfg.HTTPClient = g.io.http // set after loading, which would wrap it for AWS_CA_BUNDLE
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if g.endpoint != "" {
			o.BaseEndpoint = aws.String(g.endpoint)
		}
		checksumOption(o)
	}), nil
}

// leaseClient makes the lock client of a lease table, which must exist.
func (g *globals) leaseClient(ctx context.Context, leaseTable string) (*lock.Client, error) {
	lc, _, err := g.leaseClientAndDB(ctx, leaseTable)
	return lc, err
}

// leaseClientAndDB is leaseClient with the DynamoDB client it made, for reading other tables.
func (g *globals) leaseClientAndDB(ctx context.Context, leaseTable string) (*lock.Client, *dynamodb.Client, error) {
	db, err := g.dynamoClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := lock.CheckTable(ctx, db, leaseTable); err != nil {
		return nil, nil, err
	}
	lc, err := lock.New(db, leaseTable)
	return lc, db, err
}
