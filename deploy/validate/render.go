// Package validate checks Switchboard's Kubernetes manifests and Dockerfile
// offline: no cluster, no schema download. Each kustomize overlay is rendered
// and every object is decoded strictly against the Kubernetes API types (or,
// for the CloudNativePG and cert-manager kinds, small typed structs of the
// fields Switchboard relies on), then the objects are cross-checked:
// selectors, ports, probes, ConfigMap and Secret references, network
// policies, security settings and the Switchboard configuration file itself.
package validate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Render is one decoded overlay.
type Render struct {
	Name string

	Deployments     []*appsv1.Deployment
	Services        []*corev1.Service
	ServiceAccounts []*corev1.ServiceAccount
	ConfigMaps      []*corev1.ConfigMap
	Secrets         []*corev1.Secret
	PDBs            []*policyv1.PodDisruptionBudget
	HPAs            []*autoscalingv2.HorizontalPodAutoscaler
	NetworkPolicies []*networkingv1.NetworkPolicy
	Ingresses       []*networkingv1.Ingress

	Clusters     []*CNPGCluster
	Issuers      []*Issuer
	Certificates []*Certificate
}

var (
	scheme = runtime.NewScheme()
	// strictDecoder fails on unknown and duplicate fields and on wrong types.
	strictDecoder runtime.Decoder
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, autoscalingv2.AddToScheme,
		networkingv1.AddToScheme, policyv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	strictDecoder = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// Decode splits a multi-document YAML stream and decodes each object
// strictly. It returns every problem it finds, not just the first.
func Decode(name string, stream []byte) (*Render, []error) {
	r := &Render{Name: name}
	var errs []error
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return r, append(errs, fmt.Errorf("document %d: %w", i, err))
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		if err := r.add(doc); err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i, err))
		}
	}
	return r, errs
}

func (r *Render) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	id := tm.APIVersion + "/" + tm.Kind
	switch tm.APIVersion {
	case cnpgAPIVersion:
		if tm.Kind != "Cluster" {
			return fmt.Errorf("unexpected kind %s", id)
		}
		var c CNPGCluster
		if err := decodeCRD(doc, &c); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		r.Clusters = append(r.Clusters, &c)
		return nil
	case certManagerAPIVersion:
		switch tm.Kind {
		case "Issuer":
			var is Issuer
			if err := decodeCRD(doc, &is); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
			r.Issuers = append(r.Issuers, &is)
		case "Certificate":
			var c Certificate
			if err := decodeCRD(doc, &c); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
			r.Certificates = append(r.Certificates, &c)
		default:
			return fmt.Errorf("unexpected kind %s", id)
		}
		return nil
	}
	obj, _, err := strictDecoder.Decode(doc, nil, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		r.Deployments = append(r.Deployments, o)
	case *corev1.Service:
		r.Services = append(r.Services, o)
	case *corev1.ServiceAccount:
		r.ServiceAccounts = append(r.ServiceAccounts, o)
	case *corev1.ConfigMap:
		r.ConfigMaps = append(r.ConfigMaps, o)
	case *corev1.Secret:
		r.Secrets = append(r.Secrets, o)
	case *policyv1.PodDisruptionBudget:
		r.PDBs = append(r.PDBs, o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		r.HPAs = append(r.HPAs, o)
	case *networkingv1.NetworkPolicy:
		r.NetworkPolicies = append(r.NetworkPolicies, o)
	case *networkingv1.Ingress:
		r.Ingresses = append(r.Ingresses, o)
	default:
		return fmt.Errorf("unexpected kind %s: add it to the validator deliberately", id)
	}
	return nil
}

// decodeCRD decodes a custom resource into a typed struct, failing on any
// field the struct does not declare: a typo or a field in the wrong place
// is an error, as it is for built-in kinds.
func decodeCRD(doc []byte, into any) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("strict decoding error: %w", err)
	}
	return nil
}

// configMap returns the ConfigMap called name, or nil.
func (r *Render) configMap(name string) *corev1.ConfigMap {
	for _, c := range r.ConfigMaps {
		if c.Name == name {
			return c
		}
	}
	// Tests name a ConfigMap named by its content without the hash.
	for _, c := range r.ConfigMaps {
		if h := contentHash(c.Name); h != "" && strings.TrimSuffix(c.Name, "-"+h) == name {
			return c
		}
	}
	return nil
}

func (r *Render) service(name string) *corev1.Service {
	for _, s := range r.Services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (r *Render) deployment(name string) *appsv1.Deployment {
	for _, d := range r.Deployments {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// component is the app.kubernetes.io/component label of a Deployment's pods.
func component(d *appsv1.Deployment) string {
	return d.Spec.Template.Labels["app.kubernetes.io/component"]
}
