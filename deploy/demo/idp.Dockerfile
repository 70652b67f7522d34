# syntax=docker/dockerfile:1
#
# The demo's identity providers, as the end-to-end tests run them, from
# e2e/ with its lockfile: the OpenID provider (oidc-provider, idp/) and the
# SAML identity provider (samlify, samlidp/). openssl makes the SAML IdP's
# signing key pair when its container starts.
FROM node:22-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends openssl \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /idp
COPY e2e/package.json e2e/package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY e2e/idp ./idp
COPY e2e/samlidp ./samlidp
USER node
ENTRYPOINT ["node"]
