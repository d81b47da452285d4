// Command network-policy-engine decides Kubernetes NetworkPolicy verdicts with the policy
// engine of Cyclonus v0.5.6 (pkg/matcher: BuildNetworkPolicies, then Policy.IsTrafficAllowed
// per query, the path of cyclonus's own simulated probes). It reads one JSON document
// {"policies": [...], "queries": [...]} from stdin, decodes each policy into the real
// k8s.io/api/networking/v1 type with the API server's strict JSON decoding (sigs.k8s.io/json),
// and prints {"verdicts": [...]} in query order. Malformed input is reported on stderr with
// exit code 2.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

type pod struct {
	Namespace       string            `json:"namespace"`
	NamespaceLabels map[string]string `json:"namespaceLabels"`
	Labels          map[string]string `json:"labels"`
}

// peer is a pod when Pod is set, otherwise an address outside the cluster.
type peer struct {
	IP  string `json:"ip"`
	Pod *pod   `json:"pod"`
}

type query struct {
	Name     string `json:"name"`
	From     *peer  `json:"from"`
	To       *peer  `json:"to"`
	Port     *int   `json:"port"`
	Protocol string `json:"protocol"`
}

type input struct {
	Policies *[]json.RawMessage `json:"policies"`
	Queries  *[]query           `json:"queries"`
}

type verdict struct {
	Name    string `json:"name"`
	Allowed bool   `json:"allowed"`
	Ingress bool   `json:"ingress"`
	Egress  bool   `json:"egress"`
}

type output struct {
	Verdicts []verdict `json:"verdicts"`
}

var protocols = map[string]bool{string(v1.ProtocolTCP): true, string(v1.ProtocolUDP): true, string(v1.ProtocolSCTP): true}

func readInput(r io.Reader) (*input, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var in input
	if err := dec.Decode(&in); err == io.EOF {
		return nil, errors.New("decoding input: no JSON document on stdin")
	} else if err != nil {
		return nil, fmt.Errorf("decoding input: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decoding input: trailing data after the JSON document")
	}
	if in.Policies == nil {
		return nil, errors.New(`input: "policies" is missing (use [] for none)`)
	}
	if in.Queries == nil {
		return nil, errors.New(`input: "queries" is missing (use [] for none)`)
	}
	return &in, nil
}

func checkSelector(where string, s *metav1.LabelSelector) error {
	if s == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

func checkPeers(rule, field string, ports []networkingv1.NetworkPolicyPort, peers []networkingv1.NetworkPolicyPeer) error {
	for j, p := range ports {
		if p.Protocol != nil && !protocols[string(*p.Protocol)] {
			return fmt.Errorf("%s.ports[%d]: unsupported protocol %q", rule, j, *p.Protocol)
		}
	}
	for j, p := range peers {
		at := fmt.Sprintf("%s.%s[%d]", rule, field, j)
		if err := checkSelector(at+".podSelector", p.PodSelector); err != nil {
			return err
		}
		if err := checkSelector(at+".namespaceSelector", p.NamespaceSelector); err != nil {
			return err
		}
		// cyclonus's builder reads a peer with an ipBlock as ipBlock-only and an empty peer
		// as "every pod in the policy's namespace"; the API server refuses both.
		if p.IPBlock == nil && p.PodSelector == nil && p.NamespaceSelector == nil {
			return fmt.Errorf("%s: empty peer (needs podSelector, namespaceSelector or ipBlock)", at)
		}
		if p.IPBlock == nil {
			continue
		}
		if p.PodSelector != nil || p.NamespaceSelector != nil {
			return fmt.Errorf("%s: ipBlock together with podSelector or namespaceSelector", at)
		}
		for _, cidr := range append([]string{p.IPBlock.CIDR}, p.IPBlock.Except...) {
			if _, _, err := net.ParseCIDR(cidr); err != nil {
				return fmt.Errorf("%s.ipBlock: %w", at, err)
			}
		}
	}
	return nil
}

// buildTarget runs cyclonus's own builder on one policy, turning its panics on invalid
// peers and port ranges into errors.
func buildTarget(policy *networkingv1.NetworkPolicy) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	matcher.BuildTarget(policy)
	return nil
}

func readPolicy(raw json.RawMessage) (*networkingv1.NetworkPolicy, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, errors.New("null instead of a NetworkPolicy")
	}
	policy := &networkingv1.NetworkPolicy{}
	strict, err := kjson.UnmarshalStrict(raw, policy)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	if policy.APIVersion != "" && policy.APIVersion != "networking.k8s.io/v1" {
		return nil, fmt.Errorf("apiVersion %q, want networking.k8s.io/v1", policy.APIVersion)
	}
	if policy.Kind != "" && policy.Kind != "NetworkPolicy" {
		return nil, fmt.Errorf("kind %q, want NetworkPolicy", policy.Kind)
	}
	// cyclonus's reader (kube.ReadNetworkPoliciesFromPath) refuses these, and its builder
	// panics on them; the API server always fills the field in.
	if len(policy.Spec.PolicyTypes) == 0 {
		return nil, errors.New("missing spec.policyTypes")
	}
	for _, t := range policy.Spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			return nil, fmt.Errorf("spec.policyTypes: unknown type %q", t)
		}
	}
	if err := checkSelector("spec.podSelector", &policy.Spec.PodSelector); err != nil {
		return nil, err
	}
	for i, rule := range policy.Spec.Ingress {
		if err := checkPeers(fmt.Sprintf("spec.ingress[%d]", i), "from", rule.Ports, rule.From); err != nil {
			return nil, err
		}
	}
	for i, rule := range policy.Spec.Egress {
		if err := checkPeers(fmt.Sprintf("spec.egress[%d]", i), "to", rule.Ports, rule.To); err != nil {
			return nil, err
		}
	}
	if err := buildTarget(policy); err != nil {
		return nil, err
	}
	return policy, nil
}

func trafficPeer(side string, p *peer) (*matcher.TrafficPeer, error) {
	if p == nil {
		return nil, fmt.Errorf("%s is missing", side)
	}
	if net.ParseIP(p.IP) == nil {
		return nil, fmt.Errorf("%s.ip %q is not an IP address", side, p.IP)
	}
	tp := &matcher.TrafficPeer{IP: p.IP}
	if p.Pod != nil {
		if p.Pod.Namespace == "" {
			return nil, fmt.Errorf("%s.pod.namespace is empty", side)
		}
		tp.Internal = &matcher.InternalPeer{
			Namespace:       p.Pod.Namespace,
			NamespaceLabels: p.Pod.NamespaceLabels,
			PodLabels:       p.Pod.Labels,
		}
	}
	return tp, nil
}

func traffic(q query) (*matcher.Traffic, error) {
	from, err := trafficPeer("from", q.From)
	if err != nil {
		return nil, err
	}
	to, err := trafficPeer("to", q.To)
	if err != nil {
		return nil, err
	}
	if q.Port == nil {
		return nil, errors.New("port is missing")
	}
	if *q.Port < 1 || *q.Port > 65535 {
		return nil, fmt.Errorf("port %d is out of range 1-65535", *q.Port)
	}
	if !protocols[q.Protocol] {
		return nil, fmt.Errorf("protocol %q, want TCP, UDP or SCTP", q.Protocol)
	}
	// The query names no port, so a policy's named port (port: "dns") never matches.
	return &matcher.Traffic{
		Source:       from,
		Destination:  to,
		ResolvedPort: *q.Port,
		Protocol:     v1.Protocol(q.Protocol),
	}, nil
}

// decide runs the engine on one query; a panic here is cyclonus failing on input it was
// given after validation, not malformed input.
func decide(policy *matcher.Policy, t *matcher.Traffic) (result *matcher.AllowedResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return policy.IsTrafficAllowed(t), nil
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "network-policy-engine: "+format+"\n", args...)
	os.Exit(code)
}

func main() {
	if len(os.Args) > 1 {
		fail(2, "takes no arguments; reads {\"policies\": [...], \"queries\": [...]} on stdin")
	}
	in, err := readInput(os.Stdin)
	if err != nil {
		fail(2, "%v", err)
	}
	var policies []*networkingv1.NetworkPolicy
	for i, raw := range *in.Policies {
		policy, err := readPolicy(raw)
		if err != nil {
			fail(2, "policies[%d]: %v", i, err)
		}
		policies = append(policies, policy)
	}
	var traffics []*matcher.Traffic
	for i, q := range *in.Queries {
		t, err := traffic(q)
		if err != nil {
			fail(2, "queries[%d] (%q): %v", i, q.Name, err)
		}
		traffics = append(traffics, t)
	}

	engine := matcher.BuildNetworkPolicies(false, policies)
	out := output{Verdicts: []verdict{}}
	for i, t := range traffics {
		result, err := decide(engine, t)
		if err != nil {
			fail(1, "queries[%d] (%q): cyclonus failed: %v", i, (*in.Queries)[i].Name, err)
		}
		out.Verdicts = append(out.Verdicts, verdict{
			Name:    (*in.Queries)[i].Name,
			Allowed: result.IsAllowed(),
			Ingress: result.Ingress.IsAllowed(),
			Egress:  result.Egress.IsAllowed(),
		})
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(1, "writing output: %v", err)
	}
}
