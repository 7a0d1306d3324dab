#!/bin/sh
# LocalStack init hook: create the dynapart tables once DynamoDB is ready.
# The compose file mounts a Linux build of dynapart (make build-linux) at /usr/local/bin/dynapart.
set -e
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
dynapart init --endpoint http://127.0.0.1:4566 --table "${DYNAPART_TABLE:-users}" --key "${DYNAPART_KEY:-id:S}" \
	--ledger-table dynapart-ledger
