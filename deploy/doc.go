// Package deploy holds the tests of the shipped deployment files: the
// Kubernetes and Istio manifests under kubernetes/ and the local demo's
// docker-compose.yml. It is a module of its own so that the Kubernetes,
// Istio and Compose libraries the tests decode with stay out of the
// main module's dependencies.
package deploy
