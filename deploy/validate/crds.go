package validate

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The custom resources below declare only the fields Switchboard's
// manifests use, with the types of the operators' CRDs
// (postgresql.cnpg.io/v1 and cert-manager.io/v1). Decoding rejects any other
// field, so adding one to a manifest means adding it here after checking the
// operator's API reference.

const (
	cnpgAPIVersion        = "postgresql.cnpg.io/v1"
	certManagerAPIVersion = "cert-manager.io/v1"
)

// CNPGCluster is a CloudNativePG Cluster.
type CNPGCluster struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            CNPGClusterSpec   `json:"spec"`
}

// CNPGClusterSpec is the part of ClusterSpec Switchboard uses.
type CNPGClusterSpec struct {
	Instances             int                         `json:"instances"`
	ImageName             string                      `json:"imageName,omitempty"`
	PrimaryUpdateStrategy string                      `json:"primaryUpdateStrategy,omitempty"`
	Bootstrap             *CNPGBootstrap              `json:"bootstrap,omitempty"`
	Storage               CNPGStorage                 `json:"storage"`
	Resources             corev1.ResourceRequirements `json:"resources,omitempty"`
	Affinity              *CNPGAffinity               `json:"affinity,omitempty"`
}

// CNPGBootstrap creates the application database.
type CNPGBootstrap struct {
	InitDB *CNPGInitDB `json:"initdb,omitempty"`
}

// CNPGInitDB names the database and its owner; the operator puts the
// owner's credentials in the <cluster>-app Secret.
type CNPGInitDB struct {
	Database string `json:"database"`
	Owner    string `json:"owner"`
}

// CNPGStorage sizes each instance's volume.
type CNPGStorage struct {
	Size         string  `json:"size"`
	StorageClass *string `json:"storageClass,omitempty"`
}

// CNPGAffinity spreads instances.
type CNPGAffinity struct {
	EnablePodAntiAffinity *bool  `json:"enablePodAntiAffinity,omitempty"`
	TopologyKey           string `json:"topologyKey,omitempty"`
}

// Issuer is a cert-manager Issuer.
type Issuer struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            IssuerSpec        `json:"spec"`
}

// IssuerSpec allows the two issuer types Switchboard uses.
type IssuerSpec struct {
	SelfSigned *struct{}     `json:"selfSigned,omitempty"`
	CA         *CAIssuerSpec `json:"ca,omitempty"`
}

// CAIssuerSpec signs with the key pair in a Secret.
type CAIssuerSpec struct {
	SecretName string `json:"secretName"`
}

// Certificate is a cert-manager Certificate.
type Certificate struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            CertificateSpec   `json:"spec"`
}

// CertificateSpec is the part of the spec Switchboard uses.
type CertificateSpec struct {
	CommonName  string      `json:"commonName,omitempty"`
	SecretName  string      `json:"secretName"`
	DNSNames    []string    `json:"dnsNames,omitempty"`
	URIs        []string    `json:"uris,omitempty"`
	Duration    string      `json:"duration,omitempty"`
	RenewBefore string      `json:"renewBefore,omitempty"`
	IsCA        bool        `json:"isCA,omitempty"`
	Usages      []string    `json:"usages,omitempty"`
	PrivateKey  *PrivateKey `json:"privateKey,omitempty"`
	IssuerRef   IssuerRef   `json:"issuerRef"`
}

// PrivateKey selects the key type and rotation.
type PrivateKey struct {
	Algorithm      string `json:"algorithm,omitempty"`
	Size           int    `json:"size,omitempty"`
	RotationPolicy string `json:"rotationPolicy,omitempty"`
}

// IssuerRef names the issuer of a Certificate.
type IssuerRef struct {
	Name  string `json:"name"`
	Kind  string `json:"kind,omitempty"`
	Group string `json:"group,omitempty"`
}

// Values the cert-manager API accepts (cert-manager.io/v1 reference).
var (
	certUsages = map[string]bool{
		"signing": true, "digital signature": true, "content commitment": true,
		"key encipherment": true, "key agreement": true, "data encipherment": true,
		"cert sign": true, "crl sign": true, "encipher only": true, "decipher only": true,
		"any": true, "server auth": true, "client auth": true, "code signing": true,
		"email protection": true, "s/mime": true, "ipsec end system": true,
		"ipsec tunnel": true, "ipsec user": true, "timestamping": true,
		"ocsp signing": true, "microsoft sgc": true, "netscape sgc": true,
	}
	keyAlgorithms   = map[string]bool{"RSA": true, "ECDSA": true, "Ed25519": true}
	rotationPolices = map[string]bool{"Never": true, "Always": true}
	cnpgStrategies  = map[string]bool{"unsupervised": true, "supervised": true}
)

// Secrets the operators create, with their keys.
var (
	certificateSecretKeys = []string{"tls.crt", "tls.key", "ca.crt"}
	cnpgAppSecretKeys     = []string{"username", "password", "host", "port", "dbname", "uri", "jdbc-uri", "pgpass"}
	cnpgCASecretKeys      = []string{"ca.crt", "ca.key"}
	// Ports of a CloudNativePG instance pod: PostgreSQL, the instance
	// manager's status endpoint and its metrics exporter.
	cnpgPodPorts = map[string]int32{"postgresql": 5432, "status": 8000, "metrics": 9187}
)
