package cli

import (
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// idleConns is how many idle connections the CLI's AWS clients keep to their endpoint. The SDK's
// own client keeps 10 per host: a worker with more requests in flight (a --concurrency above 10,
// with its scans and its lease beside them) closed a connection after most answers and dialled a
// new one for a later request, on AWS a TLS handshake each. The pool holds only connections that
// were opened, so a bound well above any concurrency costs nothing while fewer are in flight.
const idleConns = 1024

// httpClient is the SDK's HTTP client with the idle pool of idleConns. It is the SDK's buildable
// client, so that the SDK's configuration can still add AWS_CA_BUNDLE's certificates to it.
func httpClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = idleConns
		tr.MaxIdleConnsPerHost = idleConns
	})
}
