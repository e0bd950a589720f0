# Builds the paykit and alipaysim binaries into one small image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/paykit ./cmd/paykit && \
    CGO_ENABLED=0 go build -trimpath -o /out/alipaysim ./cmd/alipaysim

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/paykit /out/alipaysim /usr/local/bin/
USER nobody
ENTRYPOINT ["/usr/local/bin/paykit"]
