package validate

import "sigs.k8s.io/yaml"

// otelConfig is the part of an OpenTelemetry Collector configuration the
// check follows: which components exist and which pipelines use them.
type otelConfig struct {
	Extensions map[string]map[string]any `json:"extensions"`
	Receivers  map[string]struct {
		Protocols map[string]struct {
			Endpoint string `json:"endpoint"`
		} `json:"protocols"`
	} `json:"receivers"`
	Processors map[string]any `json:"processors"`
	Exporters  map[string]any `json:"exporters"`
	Service    struct {
		Extensions []string `json:"extensions"`
		Pipelines  map[string]struct {
			Receivers  []string `json:"receivers"`
			Processors []string `json:"processors"`
			Exporters  []string `json:"exporters"`
		} `json:"pipelines"`
	} `json:"service"`
}

func otlpGRPCPort(r *Render) int32 {
	for _, d := range r.Deployments {
		if component(d) != "otel-collector" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == "otlp-grpc" {
					return cp.ContainerPort
				}
			}
		}
	}
	return 0
}

// checkCollectorConfig checks that the collector's pipelines use only
// components its configuration defines and that it listens on its
// container ports.
func checkCollectorConfig(p *problems, r *Render) {
	found := false
	for _, d := range r.Deployments {
		if component(d) != "otel-collector" {
			continue
		}
		found = true
		who := "Deployment " + d.Name
		c := d.Spec.Template.Spec.Containers[0]
		file := configArg(c.Args)
		vol, key, ok := mountedFile(d, c, file)
		if !ok || vol.ConfigMap == nil {
			p.addf("%s: --config %q is not a file of a mounted ConfigMap", who, file)
			continue
		}
		cm := r.configMap(vol.ConfigMap.Name)
		if cm == nil {
			continue
		}
		var oc otelConfig
		if err := yaml.UnmarshalStrict([]byte(cm.Data[key]), &oc); err != nil {
			p.addf("%s: collector configuration: %v", who, err)
			continue
		}
		if len(oc.Service.Pipelines["traces"].Receivers) == 0 || len(oc.Service.Pipelines["traces"].Exporters) == 0 {
			p.addf("%s: the collector has no traces pipeline with a receiver and an exporter", who)
		}
		for name, pl := range oc.Service.Pipelines {
			for _, ref := range pl.Receivers {
				if _, ok := oc.Receivers[ref]; !ok {
					p.addf("%s: pipeline %s uses undefined receiver %s", who, name, ref)
				}
			}
			for _, ref := range pl.Processors {
				if _, ok := oc.Processors[ref]; !ok {
					p.addf("%s: pipeline %s uses undefined processor %s", who, name, ref)
				}
			}
			for _, ref := range pl.Exporters {
				if _, ok := oc.Exporters[ref]; !ok {
					p.addf("%s: pipeline %s uses undefined exporter %s", who, name, ref)
				}
			}
		}
		for _, ref := range oc.Service.Extensions {
			if _, ok := oc.Extensions[ref]; !ok {
				p.addf("%s: service uses undefined extension %s", who, ref)
			}
		}
		listens := map[string]string{"otlp-grpc": "", "otlp-http": "", "health": ""}
		if otlp, ok := oc.Receivers["otlp"]; ok {
			listens["otlp-grpc"] = otlp.Protocols["grpc"].Endpoint
			listens["otlp-http"] = otlp.Protocols["http"].Endpoint
		}
		if hc, ok := oc.Extensions["health_check"]; ok {
			listens["health"], _ = hc["endpoint"].(string)
		}
		for portName, addr := range listens {
			p.expectListen(who, "collector endpoint for "+portName, addr, c, portName)
		}
	}
	if !found {
		p.addf("no OpenTelemetry Collector Deployment in the render")
	}
}
