# Multi-stage build: compile in the Rust image, run from a small Debian one
# as a non-root user. The gateway needs nats-server 2.11+ somewhere it can
# reach (NATS_URL); it does not bundle one.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p dagnats-leases --bin dagnats-leases

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home dagnats
COPY --from=build /src/target/release/dagnats-leases /usr/local/bin/dagnats-leases
USER dagnats
ENV NATS_URL=nats://nats:4222
# In a container the HTTP API must listen beyond loopback to be reachable,
# so it refuses to start without a write token: pass one at run time, e.g.
#   docker run -e DAGNATS_HTTP_TOKEN="$(openssl rand -hex 32)" ...
# (or DAGNATS_HTTP_INSECURE=1 if an open API is really meant).
ENV DAGNATS_HTTP_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["dagnats-leases"]
CMD ["serve"]
