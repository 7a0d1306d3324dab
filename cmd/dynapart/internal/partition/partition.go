// Package partition is `dynapart partition`: the partition of keys.
package partition

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/scan"
)

// New is `dynapart partition`.
func New(_ *cli.Globals) *cobra.Command {
	var workers int
	var typ string
	cmd := &cobra.Command{
		Use:   "partition --workers N [--type S|N|B] KEY...",
		Short: "Print the partition (slot) of each key: KEY<TAB>PARTITION",
		Long: `Prints, for each KEY, the partition filter mode assigns it to among --workers slots:
an integer Number by value mod N (exact for all 38 digits, never negative), any other Number by
CRC-32 of its decimal text mod N, a String by CRC-32 (IEEE) of its UTF-8 bytes mod N, and a
Binary by CRC-32 of its bytes mod N. Binary keys are given in base64. Needs no AWS access.
Put -- before the keys when one starts with a minus sign.`,
		Example: `  dynapart partition --workers 4 --type N 1 2 3 12345678901234567890123456789012345678
  dynapart partition --workers 16 user-1 user-2
  dynapart partition --workers 3 --type B AAECAw==
  dynapart partition --workers 4 --type N -- -5 -6`,
		RunE: func(cmd *cobra.Command, keys []string) error {
			if workers < 1 {
				return cli.Usagef("--workers must be at least 1, got %d", workers)
			}
			if len(keys) == 0 {
				return cli.Usagef("give at least one KEY")
			}
			out := cmd.OutOrStdout()
			for _, k := range keys {
				v, err := parseKeyValue(strings.ToUpper(typ), k)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%s\t%d\n", k, scan.Partition(v, workers))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&workers, "workers", 0, "number of slots N (required)")
	cmd.Flags().StringVar(&typ, "type", "S", "key type: S, N or B (base64)")
	return cmd
}

func parseKeyValue(typ, k string) (types.AttributeValue, error) {
	switch typ {
	case "S":
		return &types.AttributeValueMemberS{Value: k}, nil
	case "N":
		if _, ok := new(big.Float).SetString(k); !ok {
			return nil, cli.Usagef("key %q is not a number (--type N)", k)
		}
		return &types.AttributeValueMemberN{Value: k}, nil
	case "B":
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			return nil, cli.Usagef("key %q is not base64 (--type B): %v", k, err)
		}
		return &types.AttributeValueMemberB{Value: b}, nil
	default:
		return nil, cli.Usagef("--type %q: want S, N or B", typ)
	}
}
