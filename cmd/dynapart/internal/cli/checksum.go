package cli

import (
	"context"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The DynamoDB client checks each response body against its X-Amz-Crc32 header. It wraps the body
// even when the header is missing and then expects the checksum 0, so a body without the header
// "fails" the check and the SDK logs, when it closes the body, "WARN failed to close HTTP response
// body ... response did not match expected checksum, 0, N". Real DynamoDB sends the header on every
// response; DynamoDB Local omits it on error responses (ResourceNotFound of a DescribeTable,
// ConditionalCheckFailed of a contended lease), so against DynamoDB Local every such answer warned.
//
// For an endpoint that is not AWS's, crcWhenPresent replaces the SDK's check with the same check
// made only when the header is there. AWS endpoints keep the SDK's check unchanged.

// isAWSEndpoint reports whether the client talks to AWS: no endpoint override, or an override on an
// AWS domain (a VPC endpoint, a FIPS endpoint).
func isAWSEndpoint(endpoint *string) bool {
	if endpoint == nil || *endpoint == "" {
		return true
	}
	u, err := url.Parse(*endpoint)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	for _, suffix := range []string{".amazonaws.com", ".amazonaws.com.cn", ".api.aws"} {
		if strings.HasSuffix(h, suffix) {
			return true
		}
	}
	return false
}

// checksumOption is the client option that picks the response checksum check by endpoint. It must
// run after the endpoint is known (dynamodb.NewFromConfig resolves AWS_ENDPOINT_URL_DYNAMODB and
// the shared config before it applies options).
func checksumOption(o *dynamodb.Options) {
	if isAWSEndpoint(o.BaseEndpoint) {
		return
	}
	o.DisableValidateResponseChecksum = true
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Deserialize.Add(crcWhenPresent{}, middleware.After)
	})
}

// crcWhenPresent checks a response body against its X-Amz-Crc32 header when it has one.
type crcWhenPresent struct{}

func (crcWhenPresent) ID() string { return "dynapart:ResponseChecksumWhenPresent" }

func (crcWhenPresent) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleDeserialize(ctx, in)
	if err != nil {
		return out, md, err
	}
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if !ok {
		return out, md, nil
	}
	v := resp.Header.Get("X-Amz-Crc32")
	if v == "" {
		return out, md, nil
	}
	want, perr := strconv.ParseUint(v, 10, 32)
	if perr != nil {
		return out, md, fmt.Errorf("response header X-Amz-Crc32 %q: %w", v, perr)
	}
	h := crc32.NewIEEE()
	resp.Body = &crcBody{Reader: io.TeeReader(resp.Body, h), closer: resp.Body, want: uint32(want), hash: h}
	return out, md, nil
}

// crcBody compares the checksum of what was read when it is closed.
type crcBody struct {
	io.Reader
	closer io.Closer
	want   uint32
	hash   hash.Hash32
}

// errChecksum is a response body that does not match its X-Amz-Crc32 header.
type errChecksum struct{ Want, Got uint32 }

func (e *errChecksum) Error() string {
	return fmt.Sprintf("response did not match its X-Amz-Crc32 header: want %d, got %d", e.Want, e.Got)
}

func (b *crcBody) Close() error {
	cerr := b.closer.Close()
	if got := b.hash.Sum32(); got != b.want {
		return &errChecksum{Want: b.want, Got: got}
	}
	return cerr
}
