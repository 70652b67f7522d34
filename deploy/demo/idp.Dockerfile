# syntax=docker/dockerfile:1
#
# The demo's identity providers: the OpenID provider (oidc-provider) that
# the end-to-end tests run, from e2e/ with its lockfile.
FROM node:22-bookworm-slim
WORKDIR /idp
COPY e2e/package.json e2e/package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY e2e/idp ./idp
USER node
ENTRYPOINT ["node"]
