"""The optional Ingress and Gateway API HTTPRoute: off by default, and when on, valid objects
that send every path to the aicp Service, with TLS where the values ask for it.

The Ingress goes through `kubernetes-validate` (strict, newest Kubernetes). The HTTPRoute is a
CRD: it is validated against the Gateway API's own strict schema at the version the pinned
Kueue module depends on whenever the Go module cache holds it, and by its structure always.
"""

from __future__ import annotations

from typing import Any

import helm_python as helm
import jsonschema
import pytest

from tests.chart.rendering import DEFAULT_VALUES, NAMESPACE, Rendered, render
from tests.support.kube_schemas import check_metadata, gateway_api_schema, validate_builtin

HOST = "aicp.example.com"
INGRESS = {"enabled": True, "className": "nginx", "hosts": [HOST]}
PARENT = {"name": "public", "namespace": "gateway-system", "sectionName": "https"}
HTTP_ROUTE = {"enabled": True, "parentRefs": [PARENT], "hostnames": [HOST]}


def with_values(**values: Any) -> Rendered:
    return render({**DEFAULT_VALUES, **values})


def service_port(rendered: Rendered) -> dict[str, Any]:
    ports: list[dict[str, Any]] = rendered.one("Service")["spec"]["ports"]
    assert len(ports) == 1
    return ports[0]


def test_a_default_install_exposes_nothing_outside_the_cluster() -> None:
    rendered = render(DEFAULT_VALUES)

    assert rendered.all_of("Ingress") == []
    assert rendered.all_of("HTTPRoute") == []
    assert "port-forward service/aicp" in rendered.notes


@pytest.mark.parametrize("tls", [False, True], ids=["plain-http", "tls"])
def test_the_ingress_sends_every_path_of_its_host_to_the_service(tls: bool) -> None:
    ingress_values = {**INGRESS, "tls": {"secretName": "aicp-tls" if tls else ""}}
    rendered = with_values(ingress=ingress_values)

    ingress = rendered.one("Ingress")
    validate_builtin(ingress)
    check_metadata(ingress, namespaced=True)
    assert ingress["metadata"]["namespace"] == NAMESPACE
    assert ingress["spec"]["ingressClassName"] == "nginx"
    [rule] = ingress["spec"]["rules"]
    assert rule["host"] == HOST
    [path] = rule["http"]["paths"]
    assert (path["path"], path["pathType"]) == ("/", "Prefix")
    backend = path["backend"]["service"]
    assert backend["name"] == rendered.one("Service")["metadata"]["name"]
    assert backend["port"] == {"name": service_port(rendered)["name"]}
    if tls:
        assert ingress["spec"]["tls"] == [{"secretName": "aicp-tls", "hosts": [HOST]}]
        assert f"aicp login --url https://{HOST}" in rendered.notes
    else:
        assert "tls" not in ingress["spec"]
        assert f"aicp login --url http://{HOST}" in rendered.notes


def test_an_ingress_without_hosts_or_class_has_one_rule_for_every_host() -> None:
    ingress = with_values(ingress={"enabled": True}).one("Ingress")

    validate_builtin(ingress)
    assert "ingressClassName" not in ingress["spec"]
    [rule] = ingress["spec"]["rules"]
    assert "host" not in rule


def test_tls_without_a_host_to_serve_the_certificate_for_is_refused() -> None:
    with pytest.raises(helm.HelmRenderError) as failure:
        with_values(ingress={"enabled": True, "tls": {"secretName": "aicp-tls"}})

    assert "ingress.tls.secretName needs ingress.hosts" in str(failure.value)


def test_the_http_route_attaches_to_the_gateway_and_sends_every_path_to_the_service() -> None:
    rendered = with_values(httpRoute=HTTP_ROUTE)

    route = rendered.one("HTTPRoute")
    check_metadata(route, namespaced=True)
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["spec"]["parentRefs"] == [PARENT]
    assert route["spec"]["hostnames"] == [HOST]
    [rule] = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert rule["backendRefs"] == [
        {
            "name": rendered.one("Service")["metadata"]["name"],
            "port": service_port(rendered)["port"],
        }
    ]
    assert f"aicp login --url https://{HOST}" in rendered.notes
    schema = gateway_api_schema("HTTPRoute")
    if schema is not None:
        jsonschema.validate(route, schema)


def test_an_http_route_without_hostnames_takes_the_listeners_and_is_still_valid() -> None:
    route = with_values(httpRoute={"enabled": True, "parentRefs": [{"name": "public"}]}).one(
        "HTTPRoute"
    )

    assert "hostnames" not in route["spec"]
    schema = gateway_api_schema("HTTPRoute")
    if schema is not None:
        jsonschema.validate(route, schema)


def test_the_gateway_api_schema_refuses_a_route_the_apiserver_would_refuse() -> None:
    schema = gateway_api_schema("HTTPRoute")
    if schema is None:
        pytest.skip("the Gateway API CRDs are not in the Go module cache (no Go, or no build)")
    route = with_values(httpRoute=HTTP_ROUTE).one("HTTPRoute")
    route["spec"]["rules"][0]["backendRefs"][0]["portt"] = 8080

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(route, schema)


def test_an_http_route_without_a_gateway_to_attach_to_is_refused() -> None:
    with pytest.raises(helm.HelmRenderError) as failure:
        with_values(httpRoute={"enabled": True})

    assert "httpRoute.enabled needs httpRoute.parentRefs" in str(failure.value)


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        pytest.param({"ingress": {"hosts": ["https://aicp.example.com"]}}, "/ingress/hosts/0"),
        pytest.param({"ingress": {"tls": {"secret": "x"}}}, "additional properties 'secret'"),
        pytest.param(
            {"httpRoute": {"parentRefs": [{"namespace": "gw"}]}}, "/httpRoute/parentRefs/0"
        ),
        pytest.param({"httpRoute": {"hostnames": ["Aicp.Example.com"]}}, "/httpRoute/hostnames/0"),
    ],
)
def test_bad_exposure_values_are_rejected_naming_the_key(
    values: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(helm.HelmValuesError) as failure:
        with_values(**values)

    assert complaint in str(failure.value)
