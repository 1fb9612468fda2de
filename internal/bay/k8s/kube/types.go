// Package kube is the Kubernetes API as bay's driver speaks it: the few objects it makes and
// reads (Pods, Secrets, ConfigMaps, PersistentVolumeClaims, NetworkPolicies), their list, watch, patch
// and log calls over net/http and encoding/json, and the kubeconfig and in-cluster
// credentials (bearer token, client certificate, CA).
//
// It stands in for k8s.io/client-go, whose packages register every API group's types in a
// scheme when bay starts: that alone was most of bay's idle memory, for a driver that uses
// four resources. The types here hold only the fields the driver writes or reads; the API
// server ignores absent fields and the decoder drops the ones not declared, so the driver
// never writes back an object it read (it patches). Field names and JSON keys are
// Kubernetes' own (core/v1 and networking/v1), so the driver's code reads as it would with
// k8s.io/api.
package kube

import "time"

// TypeMeta names an object's kind and API version.
type TypeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

func (t *TypeMeta) setType(apiVersion, kind string) { t.APIVersion, t.Kind = apiVersion, kind }

// ObjectMeta is the metadata of an object.
type ObjectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	CreationTimestamp time.Time         `json:"creationTimestamp,omitzero"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
}

// ListMeta is the metadata of a list.
type ListMeta struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Continue        string `json:"continue,omitempty"`
}

// ---------------------------------------------------------------------------------------------
// core/v1: Pod
// ---------------------------------------------------------------------------------------------

// Pod is a core/v1 Pod.
type Pod struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Spec       PodSpec   `json:"spec"`
	Status     PodStatus `json:"status,omitzero"`
}

// PodList is a list of Pods.
type PodList struct {
	ListMeta `json:"metadata"`
	Items    []Pod `json:"items"`
}

// RestartPolicy of a Pod's containers.
type RestartPolicy string

// RestartPolicyNever: a container that ended is not restarted.
const RestartPolicyNever RestartPolicy = "Never"

// PodSpec is the part of a Pod's spec the driver sets or reads.
type PodSpec struct {
	Volumes                       []Volume               `json:"volumes,omitempty"`
	Containers                    []Container            `json:"containers"`
	RestartPolicy                 RestartPolicy          `json:"restartPolicy,omitempty"`
	TerminationGracePeriodSeconds *int64                 `json:"terminationGracePeriodSeconds,omitempty"`
	ActiveDeadlineSeconds         *int64                 `json:"activeDeadlineSeconds,omitempty"`
	AutomountServiceAccountToken  *bool                  `json:"automountServiceAccountToken,omitempty"`
	NodeName                      string                 `json:"nodeName,omitempty"`
	SecurityContext               *PodSecurityContext    `json:"securityContext,omitempty"`
	ImagePullSecrets              []LocalObjectReference `json:"imagePullSecrets,omitempty"`
	Hostname                      string                 `json:"hostname,omitempty"`
	HostAliases                   []HostAlias            `json:"hostAliases,omitempty"`
	RuntimeClassName              *string                `json:"runtimeClassName,omitempty"`
	EnableServiceLinks            *bool                  `json:"enableServiceLinks,omitempty"`
	DNSPolicy                     DNSPolicy              `json:"dnsPolicy,omitempty"`
	DNSConfig                     *PodDNSConfig          `json:"dnsConfig,omitempty"`
}

// DNSPolicy says where a Pod's resolv.conf comes from.
type DNSPolicy string

// DNSNone: only the Pod's DNSConfig.
const DNSNone DNSPolicy = "None"

// PodDNSConfig is a Pod's own resolv.conf.
type PodDNSConfig struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Searches    []string `json:"searches,omitempty"`
}

// HostAlias is an /etc/hosts entry of the Pod.
type HostAlias struct {
	IP        string   `json:"ip"`
	Hostnames []string `json:"hostnames,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	Name string `json:"name,omitempty"`
}

// PodFSGroupChangePolicy says when the kubelet changes a volume's ownership to the fsGroup.
type PodFSGroupChangePolicy string

// FSGroupChangeOnRootMismatch: only when the volume's root does not match already.
const FSGroupChangeOnRootMismatch PodFSGroupChangePolicy = "OnRootMismatch"

// PodSecurityContext is a Pod's security context.
type PodSecurityContext struct {
	FSGroup             *int64                  `json:"fsGroup,omitempty"`
	FSGroupChangePolicy *PodFSGroupChangePolicy `json:"fsGroupChangePolicy,omitempty"`
	SeccompProfile      *SeccompProfile         `json:"seccompProfile,omitempty"`
}

// SeccompProfileType is the kind of a seccomp profile.
type SeccompProfileType string

// The seccomp profiles the driver uses.
const (
	SeccompProfileTypeRuntimeDefault SeccompProfileType = "RuntimeDefault"
	SeccompProfileTypeLocalhost      SeccompProfileType = "Localhost"
)

// SeccompProfile is a container's or Pod's seccomp filter.
type SeccompProfile struct {
	Type             SeccompProfileType `json:"type"`
	LocalhostProfile *string            `json:"localhostProfile,omitempty"`
}

// Volume is a volume of a Pod: a claim, a host path or an emptyDir.
type Volume struct {
	Name string `json:"name"`
	VolumeSource
}

// VolumeSource is where a volume comes from (one field set).
type VolumeSource struct {
	HostPath              *HostPathVolumeSource              `json:"hostPath,omitempty"`
	EmptyDir              *EmptyDirVolumeSource              `json:"emptyDir,omitempty"`
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	ConfigMap             *ConfigMapVolumeSource             `json:"configMap,omitempty"`
	Projected             *ProjectedVolumeSource             `json:"projected,omitempty"`
}

// ConfigMapVolumeSource mounts the keys of one ConfigMap as files (read by the driver to find
// the ConfigMaps a Pod uses; it writes projected volumes).
type ConfigMapVolumeSource struct {
	LocalObjectReference
	Items []KeyToPath `json:"items,omitempty"`
}

// ProjectedVolumeSource is one directory made of the keys of several sources.
type ProjectedVolumeSource struct {
	Sources     []VolumeProjection `json:"sources"`
	DefaultMode *int32             `json:"defaultMode,omitempty"`
}

// VolumeProjection is one source of a projected volume (the driver uses ConfigMaps only).
type VolumeProjection struct {
	ConfigMap *ConfigMapProjection `json:"configMap,omitempty"`
}

// ConfigMapProjection is the listed keys of one ConfigMap.
type ConfigMapProjection struct {
	LocalObjectReference
	Items []KeyToPath `json:"items,omitempty"`
}

// KeyToPath puts one key at a relative path, with a file mode.
type KeyToPath struct {
	Key  string `json:"key"`
	Path string `json:"path"`
	Mode *int32 `json:"mode,omitempty"`
}

// HostPathType checks a host path before it is mounted.
type HostPathType string

// HostPathDirectory and HostPathFile: the path must be a directory (a file) that exists.
const (
	HostPathDirectory HostPathType = "Directory"
	HostPathFile      HostPathType = "File"
)

// HostPathVolumeSource is a directory of the node.
type HostPathVolumeSource struct {
	Path string        `json:"path"`
	Type *HostPathType `json:"type,omitempty"`
}

// StorageMedium backs an emptyDir.
type StorageMedium string

// StorageMediumMemory: a tmpfs.
const StorageMediumMemory StorageMedium = "Memory"

// EmptyDirVolumeSource is a scratch directory of the Pod's life.
type EmptyDirVolumeSource struct {
	Medium    StorageMedium `json:"medium,omitempty"`
	SizeLimit *Quantity     `json:"sizeLimit,omitempty"`
}

// PersistentVolumeClaimVolumeSource mounts a claim.
type PersistentVolumeClaimVolumeSource struct {
	ClaimName string `json:"claimName"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// PullPolicy says when the kubelet pulls a container's image.
type PullPolicy string

// The image pull policies.
const (
	PullAlways       PullPolicy = "Always"
	PullNever        PullPolicy = "Never"
	PullIfNotPresent PullPolicy = "IfNotPresent"
)

// TerminationMessagePolicy says where a container's termination message comes from.
type TerminationMessagePolicy string

// The termination message policies.
const (
	TerminationMessageReadFile              TerminationMessagePolicy = "File"
	TerminationMessageFallbackToLogsOnError TerminationMessagePolicy = "FallbackToLogsOnError"
)

// Protocol of a port.
type Protocol string

// The protocols the driver names.
const (
	ProtocolTCP Protocol = "TCP"
	ProtocolUDP Protocol = "UDP"
)

// Container is one container of a Pod.
type Container struct {
	Name                     string                   `json:"name"`
	Image                    string                   `json:"image,omitempty"`
	Command                  []string                 `json:"command,omitempty"`
	Args                     []string                 `json:"args,omitempty"`
	WorkingDir               string                   `json:"workingDir,omitempty"`
	Ports                    []ContainerPort          `json:"ports,omitempty"`
	Env                      []EnvVar                 `json:"env,omitempty"`
	Resources                ResourceRequirements     `json:"resources,omitzero"`
	VolumeMounts             []VolumeMount            `json:"volumeMounts,omitempty"`
	TerminationMessagePolicy TerminationMessagePolicy `json:"terminationMessagePolicy,omitempty"`
	ImagePullPolicy          PullPolicy               `json:"imagePullPolicy,omitempty"`
	SecurityContext          *SecurityContext         `json:"securityContext,omitempty"`
}

// ContainerPort is a port a container listens on.
type ContainerPort struct {
	ContainerPort int32    `json:"containerPort"`
	Protocol      Protocol `json:"protocol,omitempty"`
}

// EnvVar is one environment variable, given or taken from a Secret.
type EnvVar struct {
	Name      string        `json:"name"`
	Value     string        `json:"value,omitempty"`
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource is where a variable's value comes from.
type EnvVarSource struct {
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// SecretKeySelector is one key of a Secret.
type SecretKeySelector struct {
	LocalObjectReference
	Key string `json:"key"`
}

// VolumeMount mounts a volume of the Pod into a container.
type VolumeMount struct {
	Name      string `json:"name"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	MountPath string `json:"mountPath"`
	// SubPath mounts one entry of the volume instead of its root.
	SubPath string `json:"subPath,omitempty"`
}

// ResourceName names a resource: cpu, memory, storage.
type ResourceName string

// The resources the driver sets.
const (
	ResourceCPU     ResourceName = "cpu"
	ResourceMemory  ResourceName = "memory"
	ResourceStorage ResourceName = "storage"
)

// ResourceList maps resources to quantities.
type ResourceList map[ResourceName]Quantity

// ResourceRequirements are a container's limits and requests.
type ResourceRequirements struct {
	Limits   ResourceList `json:"limits,omitempty"`
	Requests ResourceList `json:"requests,omitempty"`
}

// Capability is a Linux capability without its CAP_ prefix.
type Capability string

// Capabilities added to and dropped from a container's.
type Capabilities struct {
	Add  []Capability `json:"add,omitempty"`
	Drop []Capability `json:"drop,omitempty"`
}

// SecurityContext is a container's security context.
type SecurityContext struct {
	Capabilities             *Capabilities   `json:"capabilities,omitempty"`
	Privileged               *bool           `json:"privileged,omitempty"`
	RunAsUser                *int64          `json:"runAsUser,omitempty"`
	RunAsGroup               *int64          `json:"runAsGroup,omitempty"`
	RunAsNonRoot             *bool           `json:"runAsNonRoot,omitempty"`
	ReadOnlyRootFilesystem   *bool           `json:"readOnlyRootFilesystem,omitempty"`
	AllowPrivilegeEscalation *bool           `json:"allowPrivilegeEscalation,omitempty"`
	SeccompProfile           *SeccompProfile `json:"seccompProfile,omitempty"`
}

// PodPhase is where a Pod is in its life.
type PodPhase string

// The phases in which every container has ended.
const (
	PodSucceeded PodPhase = "Succeeded"
	PodFailed    PodPhase = "Failed"
)

// PodConditionType names a condition of a Pod.
type PodConditionType string

// PodScheduled: the Pod has a node; PodReady: its readiness probes pass.
const (
	PodScheduled PodConditionType = "PodScheduled"
	PodReady     PodConditionType = "Ready"
)

// ConditionStatus is True, False or Unknown.
type ConditionStatus string

// ConditionFalse: the condition does not hold; ConditionTrue: it does.
const (
	ConditionFalse ConditionStatus = "False"
	ConditionTrue  ConditionStatus = "True"
)

// PodCondition is one condition of a Pod.
type PodCondition struct {
	Type    PodConditionType `json:"type"`
	Status  ConditionStatus  `json:"status"`
	Reason  string           `json:"reason,omitempty"`
	Message string           `json:"message,omitempty"`
}

// PodStatus is the part of a Pod's status the driver reads.
type PodStatus struct {
	Phase             PodPhase          `json:"phase,omitempty"`
	Conditions        []PodCondition    `json:"conditions,omitempty"`
	Message           string            `json:"message,omitempty"`
	Reason            string            `json:"reason,omitempty"`
	PodIP             string            `json:"podIP,omitempty"`
	ContainerStatuses []ContainerStatus `json:"containerStatuses,omitempty"`
}

// ContainerStatus is one container's state.
type ContainerStatus struct {
	Name        string         `json:"name"`
	State       ContainerState `json:"state,omitzero"`
	ContainerID string         `json:"containerID,omitempty"`
}

// ContainerState is one of waiting, running or terminated.
type ContainerState struct {
	Waiting    *ContainerStateWaiting    `json:"waiting,omitempty"`
	Running    *ContainerStateRunning    `json:"running,omitempty"`
	Terminated *ContainerStateTerminated `json:"terminated,omitempty"`
}

// ContainerStateWaiting says why a container does not run yet.
type ContainerStateWaiting struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ContainerStateRunning is a running container.
type ContainerStateRunning struct {
	StartedAt time.Time `json:"startedAt,omitzero"`
}

// ContainerStateTerminated is an ended container.
type ContainerStateTerminated struct {
	ExitCode int32  `json:"exitCode"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
}

// LogStreamStdout and LogStreamStderr are the streams of a container's log.
const (
	LogStreamStdout = "Stdout"
	LogStreamStderr = "Stderr"
)

// ---------------------------------------------------------------------------------------------
// core/v1: Secret, PersistentVolumeClaim
// ---------------------------------------------------------------------------------------------

// SecretType is the kind of a Secret's data.
type SecretType string

// SecretTypeOpaque: arbitrary data.
const SecretTypeOpaque SecretType = "Opaque"

// Secret is a core/v1 Secret.
type Secret struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Data       map[string][]byte `json:"data,omitempty"`
	Type       SecretType        `json:"type,omitempty"`
}

// SecretList is a list of Secrets.
type SecretList struct {
	ListMeta `json:"metadata"`
	Items    []Secret `json:"items"`
}

// ConfigMap is a core/v1 ConfigMap. An immutable one's data can never change; its metadata
// (labels, annotations) still can.
type ConfigMap struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Immutable  *bool             `json:"immutable,omitempty"`
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
}

// ConfigMapList is a list of ConfigMaps.
type ConfigMapList struct {
	ListMeta `json:"metadata"`
	Items    []ConfigMap `json:"items"`
}

// RuntimeClass is a node.k8s.io/v1 RuntimeClass (cluster-scoped): the name a Pod's
// runtimeClassName refers to, and the nodes' runtime handler it stands for.
type RuntimeClass struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Handler    string `json:"handler"`
}

// RuntimeClassList is a list of RuntimeClasses.
type RuntimeClassList struct {
	ListMeta `json:"metadata"`
	Items    []RuntimeClass `json:"items"`
}

// PersistentVolumeAccessMode is how a volume may be mounted.
type PersistentVolumeAccessMode string

// ReadWriteOnce: read-write by one node.
const ReadWriteOnce PersistentVolumeAccessMode = "ReadWriteOnce"

// PersistentVolumeClaim is a core/v1 PersistentVolumeClaim.
type PersistentVolumeClaim struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Spec       PersistentVolumeClaimSpec   `json:"spec"`
	Status     PersistentVolumeClaimStatus `json:"status,omitzero"`
}

// PersistentVolumeClaimList is a list of claims.
type PersistentVolumeClaimList struct {
	ListMeta `json:"metadata"`
	Items    []PersistentVolumeClaim `json:"items"`
}

// PersistentVolumeClaimSpec is what a claim asks for.
type PersistentVolumeClaimSpec struct {
	AccessModes      []PersistentVolumeAccessMode `json:"accessModes,omitempty"`
	Resources        VolumeResourceRequirements   `json:"resources,omitzero"`
	StorageClassName *string                      `json:"storageClassName,omitempty"`
}

// VolumeResourceRequirements is a claim's size.
type VolumeResourceRequirements struct {
	Requests ResourceList `json:"requests,omitempty"`
}

// PersistentVolumeClaimStatus is what a claim got.
type PersistentVolumeClaimStatus struct {
	Capacity ResourceList `json:"capacity,omitempty"`
}

// ---------------------------------------------------------------------------------------------
// networking/v1: NetworkPolicy
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// core/v1: Service (read only)
// ---------------------------------------------------------------------------------------------

// Service is a core/v1 Service.
type Service struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Spec       ServiceSpec `json:"spec"`
}

// ServiceList is a list of Services.
type ServiceList struct {
	ListMeta `json:"metadata"`
	Items    []Service `json:"items"`
}

// ServiceSpec is the part of a Service's spec the driver reads.
type ServiceSpec struct {
	Selector  map[string]string `json:"selector,omitempty"`
	ClusterIP string            `json:"clusterIP,omitempty"`
	Ports     []ServicePort     `json:"ports,omitempty"`
}

// ServicePort is one port of a Service and the Pods' port behind it.
type ServicePort struct {
	Name       string       `json:"name,omitempty"`
	Protocol   Protocol     `json:"protocol,omitempty"`
	Port       int32        `json:"port"`
	TargetPort *IntOrString `json:"targetPort,omitempty"`
}

// NetworkPolicy is a networking/v1 NetworkPolicy.
type NetworkPolicy struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Spec       NetworkPolicySpec `json:"spec"`
}

// NetworkPolicyList is a list of NetworkPolicies.
type NetworkPolicyList struct {
	ListMeta `json:"metadata"`
	Items    []NetworkPolicy `json:"items"`
}

// PolicyType says which direction a policy governs.
type PolicyType string

// The directions.
const (
	PolicyTypeIngress PolicyType = "Ingress"
	PolicyTypeEgress  PolicyType = "Egress"
)

// NetworkPolicySpec selects Pods and what they may reach and be reached by.
type NetworkPolicySpec struct {
	PodSelector LabelSelector              `json:"podSelector"`
	Ingress     []NetworkPolicyIngressRule `json:"ingress,omitempty"`
	Egress      []NetworkPolicyEgressRule  `json:"egress,omitempty"`
	PolicyTypes []PolicyType               `json:"policyTypes,omitempty"`
}

// NetworkPolicyIngressRule admits traffic from peers on ports.
type NetworkPolicyIngressRule struct {
	Ports []NetworkPolicyPort `json:"ports,omitempty"`
	From  []NetworkPolicyPeer `json:"from,omitempty"`
}

// NetworkPolicyEgressRule admits traffic to peers on ports.
type NetworkPolicyEgressRule struct {
	Ports []NetworkPolicyPort `json:"ports,omitempty"`
	To    []NetworkPolicyPeer `json:"to,omitempty"`
}

// NetworkPolicyPort is a protocol and port.
type NetworkPolicyPort struct {
	Protocol *Protocol    `json:"protocol,omitempty"`
	Port     *IntOrString `json:"port,omitempty"`
}

// IPBlock is an address range without exceptions.
type IPBlock struct {
	CIDR   string   `json:"cidr"`
	Except []string `json:"except,omitempty"`
}

// NetworkPolicyPeer is an address range, or Pods by label (in namespaces by label).
type NetworkPolicyPeer struct {
	PodSelector       *LabelSelector `json:"podSelector,omitempty"`
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
	IPBlock           *IPBlock       `json:"ipBlock,omitempty"`
}

// LabelSelector selects objects by exact labels.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}
