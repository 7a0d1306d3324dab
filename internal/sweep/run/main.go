// Command run is the full deterministic fault sweep (see package sweep), or one case of it.
//
//	go run ./internal/sweep/run [-endpoint URL] [-only SUBSTR] [-kinds a,b] [-stride N | -per-combo N -seed S] [-out FILE]
//	go run ./internal/sweep/run -case inline.single.segment.succeed.w1/lost-answer/k17
//
// It prints every run with a violation, then the counts (runs, faults injected, violations);
// -out writes the RELIABILITY.md section. Exit 1 when any run broke an invariant.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/sweep"
)

func main() {
	endpoint := flag.String("endpoint", os.Getenv("DYNAPART_TEST_ENDPOINT"), "DynamoDB Local endpoint (required)")
	one := flag.String("case", "", "run only this case (as a violation report names it)")
	only := flag.String("only", "", "run only the combinations whose name contains this")
	kinds := flag.String("kinds", "", "comma-separated fault kinds (default: all)")
	stride := flag.Int("stride", 1, "each kind runs every stride-th k, kind i from k = 1+i")
	perCombo := flag.Int("per-combo", 0, "instead of the stride: a seeded sample of this many faulted runs per combination (see sweep.Sampled)")
	seed := flag.Uint64("seed", 1, "seed of the -per-combo sample")
	limit := flag.Duration("limit", 0, "stop starting runs after this long (0: no limit)")
	out := flag.String("out", "", "write the RELIABILITY.md section here")
	verbose := flag.Bool("v", false, "print every run")
	flag.Parse()
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "sweep: -endpoint (or DYNAPART_TEST_ENDPOINT) is required")
		os.Exit(2)
	}
	p, err := plan(*only, *kinds, *stride)
	p.PerCombo, p.Seed = *perCombo, *seed
	if err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err)
		os.Exit(2)
	}
	if err := run(*endpoint, *one, p, *limit, *out, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err)
		os.Exit(1)
	}
}

func plan(only, kinds string, stride int) (sweep.Plan, error) {
	p := sweep.Plan{Stride: stride}
	for _, c := range sweep.Combos() {
		if strings.Contains(c.String(), only) {
			p.Combos = append(p.Combos, c)
		}
	}
	if len(p.Combos) == 0 {
		return p, fmt.Errorf("no combination matches %q", only)
	}
	if kinds != "" {
		for _, s := range strings.Split(kinds, ",") {
			k, err := ddbfault.ParseKind(strings.TrimSpace(s))
			if err != nil {
				return p, err
			}
			p.Kinds = append(p.Kinds, k)
		}
	}
	return p, nil
}

func run(endpoint, one string, p sweep.Plan, limit time.Duration, out string, verbose bool) error {
	ctx := context.Background()
	db := dynamodb.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("dynapart", "dynapart", "")})
	f, err := sweep.NewFixture(ctx, db)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close(ctx) }()
	if one != "" {
		c, err := sweep.ParseCase(one)
		if err != nil {
			return err
		}
		r := f.Run(ctx, c)
		fmt.Println(r)
		if !r.OK() {
			return fmt.Errorf("%d violations", len(r.Violations))
		}
		return nil
	}
	sctx := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	s := f.Sweep(sctx, p, func(r *sweep.Result) {
		if verbose || !r.OK() {
			fmt.Println(r)
		}
	})
	fmt.Printf("sweep: %d combinations, %d runs, %d faults injected, %d runs with violations (%d violations), %d runs where Run returned an error, %s\n",
		s.Combos, s.Runs, s.Injected, s.Broken, s.Violations, s.RunErrors, s.Wall.Round(time.Second))
	if out != "" {
		fh, err := os.Create(out)
		if err != nil {
			return err
		}
		sweep.WriteMarkdown(fh, s)
		if err := fh.Close(); err != nil {
			return err
		}
	}
	if s.Broken > 0 {
		return fmt.Errorf("%d runs broke an invariant", s.Broken)
	}
	return nil
}
