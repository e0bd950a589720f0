# Two images from one build:
#   the default target: paykit, the static binary and the CA roots only, as user 65532 (no
#     shell, no package manager); the Helm chart and Docker Compose run it;
#   simulators: the Alipay and WeChat Pay simulators and their key generators, for Docker
#     Compose only (the same user, which reads the keys keygen writes).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The release `paykit version` prints: the context has no .git to describe, so the build
# names it (docker build --build-arg PAYKIT_RELEASE=$(go run ./internal/releases/describe) .).
ARG PAYKIT_RELEASE=unreleased
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/paykit/paykit/internal/buildinfo.release=${PAYKIT_RELEASE}" -o /out/paykit ./cmd/paykit && \
    CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /out/alipaysim ./cmd/alipaysim && \
    CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /out/wechatpaysim ./cmd/wechatpaysim && \
    mkdir -m 1777 /out/tmp

FROM debian:bookworm-slim AS simulators
COPY --from=build /out/alipaysim /out/wechatpaysim /usr/local/bin/
USER 65532:65532

FROM scratch AS paykit
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# The statement downloads' temporary files (the chart mounts an emptyDir here instead).
COPY --from=build /out/tmp /tmp
COPY --from=build /out/paykit /paykit
USER 65532:65532
ENTRYPOINT ["/paykit"]
