# syntax=docker/dockerfile:1
# quotafed: one image for every region (and the demo upstream). The image runs the same compiled package that
# `npm pack` produces (dist/, lua/, regions/, bin/), with runtime dependencies only: no TypeScript, no tsx.
#   docker build -t quotafed .
#   docker run --rm -p 8080:8080 -v $PWD/regions:/etc/quotafed:ro \
#     -e QUOTAFED_CONFIG=/etc/quotafed/us-east.yaml -e QUOTAFED_HOST=0.0.0.0 -e QUOTAFED_PORT=8080 \
#     -e QUOTAFED_REDIS_URL=redis://redis.internal:6379 quotafed

# Node 24 (Active LTS, supported until April 2028); `engines` in package.json admits it. Node 20 is end of life.
ARG NODE_IMAGE=node:24-slim

# Stage 1: full install, then `npm pack`, whose prepack script compiles src/ (tsconfig.build.json, a full type
# check) into dist/; the package is unpacked to /pkg/quotafed, so the image holds exactly what npm users get.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm pack --pack-destination /pkg \
 && mkdir /pkg/quotafed \
 && tar xzf /pkg/quotafed-*.tgz -C /pkg/quotafed --strip-components=1

# Stage 2: the unpacked package and its runtime dependencies, owned by root and read-only to the service user.
FROM ${NODE_IMAGE} AS runtime
# In the image the service listens on 0.0.0.0:8080 whatever the config file says (the health check relies on
# it); set QUOTAFED_PORT to move it.
ENV NODE_ENV=production \
    QUOTAFED_HOST=0.0.0.0 \
    QUOTAFED_PORT=8080
WORKDIR /app
COPY --from=build /pkg/quotafed ./
COPY package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
# The node image's unprivileged user (uid 1000).
USER node
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.QUOTAFED_PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM is the graceful stop (stop accepting, drain, flush gossip, close Redis); give it time in your
# orchestrator (compose: stop_grace_period, Kubernetes: terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["serve"]
