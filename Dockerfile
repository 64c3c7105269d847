# cardex: one static binary on a small Debian base.
#   docker build -t cardex .
#   docker run --rm cardex --help
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The release `cardex version` and MCP serverInfo report (docker build --build-arg CARDEX_VERSION=v1.2.0).
ARG CARDEX_VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/seed0cff8200/cardex/internal/ops/buildinfo.version=${CARDEX_VERSION}" -o /out/cardex ./cmd/cardex

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /data cardex \
    && mkdir -p /data && chown cardex /data
COPY --from=build /out/cardex /usr/local/bin/cardex
USER cardex
WORKDIR /data
ENV CARDEX_DATA_DIR=/data CARDEX_LISTEN=0.0.0.0:50051 CARDEX_HTTP_LISTEN=0.0.0.0:8080
EXPOSE 50051 8080
ENTRYPOINT ["cardex"]
CMD ["serve"]
