package worker

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"
)

// NewFootprints refuses a Config New refuses, with the same *ConfigError naming the field, before
// it builds a ledger from it.
func TestNewFootprintsValidatesItsConfig(t *testing.T) {
	c := Config{Client: &dynamodb.Client{}, Table: "items", LeaseTable: "leases", Workers: -1}
	_, err := New(c)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce, "a negative group size")
	want := ce.Field
	_, err = NewFootprints(c, []string{"id"})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, want, ce.Field)

	c.Workers = 1
	_, err = NewFootprints(c, []string{"id"})
	require.NoError(t, err)
}
