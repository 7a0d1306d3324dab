package cli

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
	"github.com/stretchr/testify/require"
)

// fakeDynamoDB answers every request with body and, when crc is not empty, that X-Amz-Crc32.
func fakeDynamoDB(t *testing.T, body, crc string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if crc != "" {
			w.Header().Set("X-Amz-Crc32", crc)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestChecksumCheckedWhenPresent: against a non-AWS endpoint a body that does not match its
// X-Amz-Crc32 header is still reported; a body without the header is not.
func TestChecksumCheckedWhenPresent(t *testing.T) {
	body := `{"TableNames":["a"]}`
	good := fmt.Sprint(crc32.ChecksumIEEE([]byte(body)))
	for _, tc := range []struct {
		name, crc string
		warns     bool
	}{{"matching", good, false}, {"missing", "", false}, {"wrong", "12345", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			db := dynamodb.New(dynamodb.Options{
				Region:       "us-east-1",
				Credentials:  credentials.NewStaticCredentialsProvider("x", "y", ""),
				BaseEndpoint: aws.String(fakeDynamoDB(t, body, tc.crc)),
				Logger:       logging.NewStandardLogger(&logged),
			}, checksumOption)
			out, err := db.ListTables(context.Background(), &dynamodb.ListTablesInput{})
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, out.TableNames)
			require.Equal(t, tc.warns, strings.Contains(logged.String(), "did not match its X-Amz-Crc32"), logged.String())
		})
	}
}

func TestIsAWSEndpoint(t *testing.T) {
	for ep, want := range map[string]bool{
		"": true, "https://dynamodb.eu-west-1.amazonaws.com": true, "https://vpce-1.dynamodb.us-east-1.vpce.amazonaws.com": true,
		"https://dynamodb.cn-north-1.amazonaws.com.cn": true, "http://127.0.0.1:8000": false, "http://localstack:4566": false,
		"http://amazonaws.com.evil.example": false,
	} {
		require.Equal(t, want, isAWSEndpoint(aws.String(ep)), ep)
	}
	require.True(t, isAWSEndpoint(nil))
}
