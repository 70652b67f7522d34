package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	istionetworking "istio.io/api/networking/v1alpha3"
	istiosecurity "istio.io/api/security/v1beta1"
	istionetworkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// object is one decoded manifest.
type object struct {
	Kind, Name, Namespace string
	Value                 any
}

// decodeManifest decodes one Kubernetes or Istio manifest into its API
// type, strictly: an unknown or duplicated field anywhere, including the
// specs of Istio resources (whose own JSON decoders skip unknown fields),
// is an error. A kind it does not know is an error too.
func decodeManifest(doc []byte) (object, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return object{}, err
	}
	var (
		v    any
		spec proto.Message
	)
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 Deployment":
		v = &appsv1.Deployment{}
	case "v1 Service":
		v = &corev1.Service{}
	case "v1 ConfigMap":
		v = &corev1.ConfigMap{}
	case "v1 Secret":
		v = &corev1.Secret{}
	case "v1 Namespace":
		v = &corev1.Namespace{}
	case "security.istio.io/v1 AuthorizationPolicy":
		v, spec = &istiosecurityv1.AuthorizationPolicy{}, &istiosecurity.AuthorizationPolicy{}
	case "networking.istio.io/v1 ServiceEntry":
		v, spec = &istionetworkingv1.ServiceEntry{}, &istionetworking.ServiceEntry{}
	default:
		return object{}, fmt.Errorf("unknown kind %s %s", head.APIVersion, head.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		return object{}, fmt.Errorf("%s: %w", head.Kind, err)
	}
	if spec != nil {
		if err := strictSpec(doc, spec); err != nil {
			return object{}, fmt.Errorf("%s spec: %w", head.Kind, err)
		}
	}
	meta := v.(interface {
		GetName() string
		GetNamespace() string
	})
	return object{Kind: head.Kind, Name: meta.GetName(), Namespace: meta.GetNamespace(), Value: v}, nil
}

// strictSpec decodes the spec of doc into an Istio API message with
// protojson, which refuses unknown fields.
func strictSpec(doc []byte, into proto.Message) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	var whole struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(js, &whole); err != nil {
		return err
	}
	if len(bytes.TrimSpace(whole.Spec)) == 0 {
		return fmt.Errorf("no spec")
	}
	return protojson.Unmarshal(whole.Spec, into)
}
