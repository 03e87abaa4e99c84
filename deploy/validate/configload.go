package validate

import (
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// loadedConfig is one service's configuration as its pod reads it: the
// Deployment, its container, and the file parsed with the container's
// environment.
type loadedConfig struct {
	d   *appsv1.Deployment
	c   corev1.Container
	cfg *config.Config
}

// loadServiceConfigs reads each Switchboard service's configuration from
// the ConfigMap its --config names, with its TLS files and telemetry
// endpoint checked, by component; what cannot be read is a problem and
// missing from the map.
func loadServiceConfigs(p *problems, r *Render) map[string]loadedConfig {
	byComponent := map[string]loadedConfig{}
	configMaps := map[string]bool{}
	for _, d := range r.Deployments {
		comp := component(d)
		if !slices.Contains(switchboardServices, comp) {
			continue
		}
		who := "Deployment " + d.Name
		if len(d.Spec.Template.Spec.Containers) != 1 {
			p.addf("%s: expected one container", who)
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		file := configArg(c.Args)
		if file == "" {
			p.addf("%s: no --config argument", who)
			continue
		}
		vol, key, ok := mountedFile(d, c, file)
		if !ok || vol.ConfigMap == nil {
			p.addf("%s: --config %s is not a file of a mounted ConfigMap", who, file)
			continue
		}
		cm := r.configMap(vol.ConfigMap.Name)
		if cm == nil {
			continue // reported by checkDeployment
		}
		raw, ok := cm.Data[key]
		if !ok {
			p.addf("%s: ConfigMap %s has no key %s", who, cm.Name, key)
			continue
		}
		configMaps[cm.Name] = true
		cfg, err := config.Parse([]byte(raw), envLookup(c))
		if err != nil {
			p.addf("%s: %s of ConfigMap %s: %v", who, key, cm.Name, err)
			continue
		}
		byComponent[comp] = loadedConfig{d: d, c: c, cfg: cfg}
		if err := cfg.ServiceAuth.Validate(); err != nil {
			p.addf("%s: %s of ConfigMap %s: %v", who, key, cm.Name, err)
		}

		tls := cfg.ServiceAuth.TLS
		for k, f := range map[string]string{"certFile": tls.CertFile, "keyFile": tls.KeyFile, "caFile": tls.CAFile, "clientCAFile": tls.ClientCAFile} {
			if f != "" {
				p.expectMountedFile(r, d, c, "serviceAuth.tls."+k, f)
			}
		}
		if tls.Enabled() && (tls.CertFile == "" || tls.KeyFile == "" || tls.CAFile == "") {
			p.addf("%s: serviceAuth.tls needs certFile, keyFile and caFile together", who)
		}
		if cfg.Telemetry.OTLPEndpoint != "" {
			p.expectEndpoint(r, who, "telemetry.otlpEndpoint", cfg.Telemetry.OTLPEndpoint, "otel-collector", otlpGRPCPort(r))
		}
	}
	if len(configMaps) > 1 {
		p.addf("the services mount different configuration ConfigMaps %v: a deployment has one file", keys(configMaps))
	}
	for _, comp := range switchboardServices {
		if _, ok := byComponent[comp]; !ok {
			p.addf("no loadable configuration for the %s", comp)
		}
	}
	return byComponent
}

// expectMountedFile checks that file, which key of the configuration
// names, is a file of a volume c mounts: a key of the ConfigMap or Secret
// behind it (a service refuses to start on a file it cannot read).
func (p *problems) expectMountedFile(r *Render, d *appsv1.Deployment, c corev1.Container, key, file string) {
	who := "Deployment " + d.Name
	v, name, ok := mountedFile(d, c, file)
	switch {
	case !ok:
		p.addf("%s: %s %s is not a file of a mounted volume", who, key, file)
	case v.Secret != nil && !slices.Contains(r.availableSecrets()[v.Secret.SecretName], name):
		p.addf("%s: %s %s: Secret %s has no key %s", who, key, file, v.Secret.SecretName, name)
	case v.ConfigMap != nil:
		if cm := r.configMap(v.ConfigMap.Name); cm == nil || cm.Data[name] == "" {
			p.addf("%s: %s %s: ConfigMap %s has no key %s", who, key, file, v.ConfigMap.Name, name)
		}
	}
}

// mountedFile finds what a container sees at file: the ConfigMap or Secret
// volume mounted above it and the key that backs it.
func mountedFile(d *appsv1.Deployment, c corev1.Container, file string) (vol corev1.Volume, key string, ok bool) {
	for _, m := range c.VolumeMounts {
		rel, found := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !found || strings.Contains(rel, "/") {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			var items []corev1.KeyToPath
			switch {
			case v.ConfigMap != nil:
				items = v.ConfigMap.Items
			case v.Secret != nil:
				items = v.Secret.Items
			default:
				return v, "", false
			}
			if len(items) == 0 {
				return v, rel, true
			}
			for _, it := range items {
				if it.Path == rel {
					return v, it.Key, true
				}
			}
			return v, "", false
		}
	}
	return corev1.Volume{}, "", false
}

// envLookup resolves ${NAME} as the container would see it. A value from a
// Secret is unknown here, so it stands in as a non-empty placeholder: the
// check is that the reference is wired, not what the secret holds. A key
// of the token digests Secret stands in as the digest of the placeholder
// of the same key of the tokens Secret (digestPlaceholder), so that a
// server's tokenSHA256 and a client's token match when they name one
// client→server pair.
func envLookup(c corev1.Container) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, e := range c.Env {
			if e.Name != name {
				continue
			}
			switch {
			case e.ValueFrom == nil:
				return e.Value, true
			case e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == ServiceTokenDigestSecret:
				return digestPlaceholder(e.ValueFrom.SecretKeyRef.Key), true
			case e.ValueFrom.SecretKeyRef != nil:
				return secretPlaceholder(e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key), true
			case e.ValueFrom.ConfigMapKeyRef != nil:
				return "configmap:" + e.ValueFrom.ConfigMapKeyRef.Name + "/" + e.ValueFrom.ConfigMapKeyRef.Key, true
			default:
				return "1", true
			}
		}
		return "", false
	}
}

func configArg(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v
		}
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
