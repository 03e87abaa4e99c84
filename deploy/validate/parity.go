package validate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Compare checks that two renders of the same deployment, the kustomize
// overlay (want) and the Helm chart with the matching values (got),
// produce the same objects: the same (kind, name) pairs, and for each the
// same namespace and the same spec (container ports, probes, environment,
// volumes, replicas, HPA bounds, PDBs, NetworkPolicy rules, Certificates,
// the Ingress's annotations and rules), and ConfigMaps with the same
// content, compared as parsed YAML since the chart writes the files with
// toYaml (no comments, sorted keys).
//
// What may differ, and is normalised away first: metadata labels and
// annotations (each tool adds its own; the Ingress's annotations are
// compared), pod template annotations (the chart's checksum/config), the
// content hash kustomize and the chart append to a ConfigMap's name, the
// order of a container's env, volumeMounts and a pod's volumes (kustomize
// patches prepend), and a Deployment without replicas, which means one.
func Compare(want, got *Render) []error {
	var p problems
	wantObjs, err := normalisedObjects(want, hashedNames(want))
	if err != nil {
		return []error{fmt.Errorf("%s: %w", want.Name, err)}
	}
	gotObjs, err := normalisedObjects(got, hashedNames(got))
	if err != nil {
		return []error{fmt.Errorf("%s: %w", got.Name, err)}
	}
	for _, id := range sortedKeys(wantObjs) {
		g, ok := gotObjs[id]
		if !ok {
			p.addf("%s is in %s but not in %s", id, want.Name, got.Name)
			continue
		}
		var diffs []difference
		diffValues("", wantObjs[id], g, &diffs)
		for _, d := range diffs {
			p.addf("%s %s: %s has %s, %s has %s", id, d.path, want.Name, brief(d.want), got.Name, brief(d.got))
		}
	}
	for _, id := range sortedKeys(gotObjs) {
		if _, ok := wantObjs[id]; !ok {
			p.addf("%s is in %s but not in %s", id, got.Name, want.Name)
		}
	}
	return p
}

// hashedNames maps each ConfigMap of r named by its content to its name
// without the hash.
func hashedNames(r *Render) map[string]string {
	hashed := map[string]string{}
	for _, cm := range r.ConfigMaps {
		if h := contentHash(cm.Name); h != "" {
			hashed[cm.Name] = strings.TrimSuffix(cm.Name, "-"+h)
		}
	}
	return hashed
}

// contentHash returns the last dash-separated part of a ConfigMap's name
// if it has the shape of a content hash, else "": ten characters of
// kustomize's alphabet (hexadecimal digits with 0, 1, 3, a and e spelled
// g, h, k, m and t) or of hexadecimal (the chart's, a SHA-256 cut).
func contentHash(name string) string {
	i := strings.LastIndex(name, "-")
	if i < 0 || len(name)-i-1 != 10 {
		return ""
	}
	h := name[i+1:]
	kustomize, hex := true, true
	for _, c := range h {
		kustomize = kustomize && strings.ContainsRune("bcdfghkmt2456789", c)
		hex = hex && strings.ContainsRune("0123456789abcdef", c)
	}
	if !kustomize && !hex {
		return ""
	}
	return h
}

// normalisedObjects maps "Kind name" to the object as generic JSON with
// the differences Compare allows removed. Strings equal to a name in
// rename (a hashed ConfigMap name) are replaced by its unhashed name.
func normalisedObjects(r *Render, rename map[string]string) (map[string]any, error) {
	out := map[string]any{}
	add := func(kind string, objs any) error {
		v := reflect.ValueOf(objs)
		for i := 0; i < v.Len(); i++ {
			raw, err := json.Marshal(v.Index(i).Interface())
			if err != nil {
				return err
			}
			var obj map[string]any
			if err := json.Unmarshal(raw, &obj); err != nil {
				return err
			}
			obj = renameStrings(obj, rename).(map[string]any)
			meta, _ := obj["metadata"].(map[string]any)
			name, _ := meta["name"].(string)
			kept := map[string]any{"name": name, "namespace": meta["namespace"]}
			if kind == "Ingress" {
				kept["annotations"] = meta["annotations"]
			}
			obj["metadata"] = kept
			delete(obj, "status")
			delete(obj, "apiVersion")
			delete(obj, "kind")
			switch kind {
			case "ConfigMap":
				normaliseConfigMap(obj)
			case "Deployment":
				normaliseDeployment(obj)
			}
			id := kind + " " + name
			if _, dup := out[id]; dup {
				return fmt.Errorf("%s appears twice", id)
			}
			out[id] = obj
		}
		return nil
	}
	for _, k := range []struct {
		kind string
		objs any
	}{
		{"Deployment", r.Deployments}, {"Service", r.Services}, {"ServiceAccount", r.ServiceAccounts},
		{"ConfigMap", r.ConfigMaps}, {"Secret", r.Secrets}, {"PodDisruptionBudget", r.PDBs},
		{"HorizontalPodAutoscaler", r.HPAs}, {"NetworkPolicy", r.NetworkPolicies}, {"Ingress", r.Ingresses},
		{"Cluster", r.Clusters}, {"Issuer", r.Issuers}, {"Certificate", r.Certificates},
	} {
		if err := add(k.kind, k.objs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func renameStrings(v any, rename map[string]string) any {
	switch t := v.(type) {
	case string:
		if n, ok := rename[t]; ok {
			return n
		}
	case map[string]any:
		for k, e := range t {
			t[k] = renameStrings(e, rename)
		}
	case []any:
		for i, e := range t {
			t[i] = renameStrings(e, rename)
		}
	}
	return v
}

// normaliseConfigMap parses each data value as YAML, so that the content
// is compared rather than its formatting.
func normaliseConfigMap(obj map[string]any) {
	data, _ := obj["data"].(map[string]any)
	for k, v := range data {
		s, _ := v.(string)
		var parsed any
		if err := yaml.Unmarshal([]byte(s), &parsed); err == nil {
			data[k] = parsed
		}
	}
}

func normaliseDeployment(obj map[string]any) {
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		return
	}
	if _, ok := spec["replicas"]; !ok {
		spec["replicas"] = float64(1)
	}
	tmpl, _ := spec["template"].(map[string]any)
	if meta, ok := tmpl["metadata"].(map[string]any); ok {
		delete(meta, "annotations")
	}
	pod, _ := tmpl["spec"].(map[string]any)
	if pod == nil {
		return
	}
	sortByName(pod, "volumes")
	for _, key := range []string{"containers", "initContainers"} {
		cs, _ := pod[key].([]any)
		for _, c := range cs {
			if cm, ok := c.(map[string]any); ok {
				sortByName(cm, "env")
				sortByName(cm, "volumeMounts")
			}
		}
	}
}

func sortByName(obj map[string]any, key string) {
	list, _ := obj[key].([]any)
	name := func(v any) string {
		m, _ := v.(map[string]any)
		s, _ := m["name"].(string)
		return s
	}
	sort.SliceStable(list, func(i, j int) bool { return name(list[i]) < name(list[j]) })
}

// difference is a value that differs between two objects, at path.
type difference struct {
	path      string
	want, got any
}

// diffValues appends every difference between a and b, each at the
// deepest path where the two still have the same shape.
func diffValues(path string, a, b any, out *[]difference) {
	switch at := a.(type) {
	case map[string]any:
		bt, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range at {
			keys[k] = true
		}
		for k := range bt {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			diffValues(path+"."+k, at[k], bt[k], out)
		}
		return
	case []any:
		bt, ok := b.([]any)
		if !ok || len(at) != len(bt) {
			break
		}
		for i := range at {
			diffValues(fmt.Sprintf("%s[%d]", path, i), at[i], bt[i], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, difference{path: path, want: a, got: b})
	}
}

func brief(v any) string {
	if v == nil {
		return "(absent)"
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(raw) > 200 {
		return string(raw[:200]) + "..."
	}
	return string(raw)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
