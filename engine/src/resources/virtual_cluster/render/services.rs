//! The control plane's Service and its headless Service.

use serde_json::{Value as Json, json};

use super::metadata::{annotations, chart_labels, meta, object, selector, string_map};
use crate::backends::kube::host::ObjectKind;
use crate::resources::virtual_cluster::{
    model::Spec,
    objects::Names,
    values::{at, text, truthy},
};

pub(super) fn service(v: &Json, spec: &Spec) -> Json {
    let mut labels = chart_labels(spec, None);
    labels.insert("vcluster.loft.sh/service".to_owned(), "true".to_owned());
    labels.extend(string_map(at(v, "controlPlane.service.labels")));
    let ann = annotations(
        v,
        "controlPlane.advanced.globalMetadata.annotations",
        "controlPlane.service.annotations",
    );
    let mut body = at(v, "controlPlane.service.spec")
        .cloned()
        .filter(Json::is_object)
        .unwrap_or(json!({}));
    let node_port = |setting: &str, port: &mut Json| {
        if let Some(n) = at(v, setting).filter(|n| n.as_i64() != Some(0) && !n.is_null()) {
            port["nodePort"] = n.clone();
        }
    };
    if !truthy(v, "controlPlane.service.spec.ports") {
        let mut ports = Vec::new();
        let mut https =
            json!({ "name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP" });
        node_port("controlPlane.service.httpsNodePort", &mut https);
        ports.push(https);
        if truthy(v, "integrations.istio.enabled") {
            let mut wake = json!({ "name": "wake-http", "port": 9090, "protocol": "TCP" });
            node_port("controlPlane.service.httpsNodePort", &mut wake);
            ports.push(wake);
        }
        if truthy(v, "networking.advanced.proxyKubelets.byHostname")
            && text(v, "controlPlane.service.spec.type") != "LoadBalancer"
        {
            let mut kubelet =
                json!({ "name": "kubelet", "port": 10250, "targetPort": 8443, "protocol": "TCP" });
            node_port("controlPlane.service.kubeletNodePort", &mut kubelet);
            ports.push(kubelet);
        }
        body["ports"] = json!(ports);
    }
    if !truthy(v, "controlPlane.service.spec.selector") {
        body["selector"] = selector(spec);
    }
    object(
        ObjectKind::Service,
        meta(&spec.name, Some(&spec.namespace), &labels, &ann),
        json!({ "spec": body }),
    )
}

pub(super) fn headless_service(v: &Json, spec: &Spec, names: &Names) -> Json {
    let labels = chart_labels(spec, at(v, "controlPlane.advanced.headlessService.labels"));
    let ann = annotations(
        v,
        "controlPlane.advanced.headlessService.annotations",
        "controlPlane.advanced.globalMetadata.annotations",
    );
    let mut ports =
        vec![json!({ "name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP" })];
    if truthy(v, "controlPlane.backingStore.etcd.embedded.enabled") {
        ports.push(json!({ "name": "etcd", "port": 2379, "targetPort": 2379, "protocol": "TCP" }));
        ports.push(json!({ "name": "peer", "port": 2380, "targetPort": 2380, "protocol": "TCP" }));
    }
    object(
        ObjectKind::Service,
        meta(&names.headless(), Some(&spec.namespace), &labels, &ann),
        json!({ "spec": {
            "publishNotReadyAddresses": true,
            "ports": ports,
            "clusterIP": "None",
            "selector": selector(spec),
        } }),
    )
}
