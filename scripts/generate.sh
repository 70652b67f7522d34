#!/usr/bin/env bash
# Regenerates the Go code of every .proto in the repository, reproducibly:
# the same protoc (Debian bookworm's protobuf-compiler) and pinned plugin
# versions always write the same bytes, so `make generate` followed by
# `git diff --exit-code` checks that the committed code is current.
#
# Installs what it lacks: protoc and the well-known .proto files from
# Debian (protobuf-compiler, libprotobuf-dev), the Go plugins into
# ./bin/tools. Set SVC_PROTOC_ANY=1 to accept another protoc version (the
# output then differs in its header comment).
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_VERSION="3.21.12"
PROTOC_GEN_GO_VERSION="v1.36.12"
PROTOC_GEN_GO_GRPC_VERSION="v1.6.2"
WKT_INCLUDE="/usr/include"

if ! command -v protoc >/dev/null 2>&1 || [ ! -f "$WKT_INCLUDE/google/protobuf/struct.proto" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! apt-cache show protobuf-compiler >/dev/null 2>&1; then
    $sudo apt-get update -qq
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    protobuf-compiler libprotobuf-dev >/dev/null
fi

have=$(protoc --version | awk '{print $2}')
if [ "$have" != "$PROTOC_VERSION" ] && [ "${SVC_PROTOC_ANY:-}" != "1" ]; then
  echo "generate: protoc $PROTOC_VERSION required (Debian bookworm protobuf-compiler), found $have;" >&2
  echo "generate: set SVC_PROTOC_ANY=1 to generate anyway" >&2
  exit 1
fi

tools="$PWD/bin/tools"
mkdir -p "$tools"
GOBIN="$tools" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
GOBIN="$tools" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

# Directories whose .proto files are generated beside them.
PROTO_DIRS="authz/v1"
# shellcheck disable=SC2086 # one argument per directory
protos=$(find $PROTO_DIRS -maxdepth 1 -name '*.proto' | LC_ALL=C sort)
if [ -z "$protos" ]; then
  echo "generate: no .proto files in $PROTO_DIRS" >&2
  exit 1
fi

# shellcheck disable=SC2086 # one argument per file
protoc \
  -I . -I "$WKT_INCLUDE" \
  --plugin=protoc-gen-go="$tools/protoc-gen-go" \
  --plugin=protoc-gen-go-grpc="$tools/protoc-gen-go-grpc" \
  --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  $protos

echo "generate: $(echo "$protos" | wc -l) proto file(s) -> Go"
