# syntax=docker/dockerfile:1
# quotafed: one image for every region (and the demo upstream). The service runs from TypeScript through tsx,
# which is a runtime dependency, so there is no build output to copy: the first stage only type-checks.
#   docker build -t quotafed .
#   docker run --rm -p 8080:8080 -v $PWD/regions:/etc/quotafed:ro \
#     -e QUOTAFED_CONFIG=/etc/quotafed/us-east.yaml -e QUOTAFED_HOST=0.0.0.0 -e QUOTAFED_PORT=8080 \
#     -e QUOTAFED_REDIS_URL=redis://redis.internal:6379 quotafed

ARG NODE_IMAGE=node:20-slim

# Stage 1: full install and a type check, so an image is never built from code that does not compile.
FROM ${NODE_IMAGE} AS check
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY lua ./lua
RUN npx tsc -p tsconfig.json --noEmit

# Stage 2: runtime dependencies only, owned by root and read-only to the service user.
FROM ${NODE_IMAGE} AS runtime
# In the image the service listens on 0.0.0.0:8080 whatever the config file says (the health check relies on
# it); set QUOTAFED_PORT to move it.
ENV NODE_ENV=production \
    QUOTAFED_HOST=0.0.0.0 \
    QUOTAFED_PORT=8080
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
# Taking src from the check stage makes the type check a required step of the build.
COPY --from=check /app/src ./src
COPY lua ./lua
COPY regions ./regions
# The node image's unprivileged user (uid 1000). tsx caches its transforms under /tmp, which it may write.
USER node
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.QUOTAFED_PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM is the graceful stop (stop accepting, drain, flush gossip, close Redis); give it time in your
# orchestrator (compose: stop_grace_period, Kubernetes: terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "--import", "tsx", "src/cli/main.ts"]
CMD ["serve"]
