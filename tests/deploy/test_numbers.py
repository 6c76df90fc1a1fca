"""The rendered manifests hold the seeds' numbers (seed 000, "Scaling"; seed 002, "A release of
the workers"): read from ``helm template`` of production's values, never from the templates."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from pinecall_contracts.environment import PINECALL_VARIABLES
from pinecall_roster.settings import RosterSettings

HTTP = {
    "roster": 8101,
    "call-log": 8102,
    "dispatcher": 8103,
    "webhook-ingest": 8104,
    "reaper": 8105,
    "chat": 8106,
}
ENVIRONMENTS = {"production": "pinecall", "sandbox": "pinecall-sandbox"}
CORE = {"production": (2, 2), "sandbox": (2, 1)}  # (workers, seats) on the core node
MIGRATES = {"roster", "call-log", "dispatcher"}
HEALTH_PORT = 8081
Doc = dict[str, Any]


@pytest.fixture(scope="module")
def production(rendered: dict[str, list[Doc]]) -> dict[tuple[str, str], Doc]:
    return {(d["kind"], d["metadata"]["name"]): d for d in rendered["production"]}


def _container(deployment: Doc) -> Doc:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _env(container: Doc) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def _selects(selector: Doc, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def _pods_labels(deployment: Doc) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


@pytest.mark.parametrize("service", sorted(HTTP))
def test_an_http_service_runs_two_replicas_kept_one_up_serving_30_s_after_stop(
    production: dict[tuple[str, str], Doc], service: str
) -> None:
    deployment = production["Deployment", f"pinecall-{service}"]
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pdbs = [d for (kind, _), d in production.items() if kind == "PodDisruptionBudget"]
    (pdb,) = [p for p in pdbs if _selects(p["spec"]["selector"], _pods_labels(deployment))]
    assert pdb["spec"] == {"minAvailable": 1, "selector": pdb["spec"]["selector"]}
    container = _container(deployment)
    assert container["lifecycle"]["preStop"] == {"sleep": {"seconds": 30}}
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] > 30
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["ports"] == [
        {"name": "http", "containerPort": HTTP[service], "protocol": "TCP"}
    ]
    env = _env(container)
    assert env["PINECALL_PORT"] == str(HTTP[service])
    assert env["PINECALL_HOST"] == "0.0.0.0"
    assert env["OTEL_SERVICE_NAME"] == service
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] == "/metrics"
    service_doc = production["Service", f"pinecall-{service}"]
    assert service_doc["spec"]["ports"][0]["port"] == HTTP[service]


def test_the_keep_alive_is_past_the_load_balancers_600_s() -> None:
    from pinecall_servicekit.lifecycle import KEEP_ALIVE_S

    assert KEEP_ALIVE_S == 620  # every HTTP image serves through servicekit's serve_http


def _worker_deployment(production: dict[tuple[str, str], Doc], name: str) -> Doc:
    deployment = production["Deployment", name]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == 900
    container = _container(deployment)
    assert container["ports"] == [
        {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"}
    ]
    assert container["startupProbe"]["httpGet"]["port"] == "health"
    assert container["livenessProbe"]["httpGet"]["port"] == "health"
    assert _env(container)["PINECALL_HEALTH_PORT"] == str(HEALTH_PORT)
    assert _env(container)["PINECALL_WORKER_HOST"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    return deployment


@pytest.mark.parametrize("environment", sorted(ENVIRONMENTS))
def test_core_workers_replace_one_pod_at_a_time_and_never_have_fewer(
    production: dict[tuple[str, str], Doc], environment: str
) -> None:
    deployment = _worker_deployment(production, f"pinecall-worker-core-{environment}")
    workers, seats = CORE[environment]
    assert deployment["spec"]["replicas"] == workers
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    env = _env(_container(deployment))
    assert env["PINECALL_MAX_JOBS"] == str(seats)
    assert env["PINECALL_FLEET"] == ENVIRONMENTS[environment]
    assert env["PINECALL_FLEET_KEY"]["secretKeyRef"]["key"] == environment
    node = deployment["spec"]["template"]["spec"]["nodeSelector"]
    assert node == {"cloud.google.com/gke-nodepool": "core"}


@pytest.mark.parametrize("environment", sorted(ENVIRONMENTS))
def test_the_overflow_runs_per_environment(
    production: dict[tuple[str, str], Doc], environment: str
) -> None:
    deployment = _worker_deployment(production, f"pinecall-overflow-{environment}")
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    assert _env(_container(deployment))["PINECALL_FLEET"] == ENVIRONMENTS[environment]
    assert _container(deployment)["image"].split(":")[0].endswith("/pinecall-overflow")


def _scaled(production: dict[tuple[str, str], Doc], environment: str) -> tuple[Doc, Doc, Doc]:
    name = f"pinecall-worker-scaled-{environment}"
    scaled_object = production["ScaledObject", name]
    trigger_auth = production[
        "TriggerAuthentication",
        scaled_object["spec"]["triggers"][0]["authenticationRef"]["name"],
    ]
    return _worker_deployment(production, name), scaled_object, trigger_auth


@pytest.mark.parametrize("environment", sorted(ENVIRONMENTS))
def test_scaled_workers_are_32_seats_alone_on_a_worker_node_rolled_a_quarter_at_a_time(
    production: dict[tuple[str, str], Doc], environment: str
) -> None:
    deployment, _, _ = _scaled(production, environment)
    spec = deployment["spec"]
    assert "replicas" not in spec  # KEDA's to set
    assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": "25%", "maxSurge": "25%"}
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "workers"}
    assert {"key": "pinecall.dev/pool", "operator": "Equal", "value": "workers"}.items() <= (
        pod["tolerations"][0].items()
    )
    (rule,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert rule["topologyKey"] == "kubernetes.io/hostname"
    assert _env(_container(deployment))["PINECALL_MAX_JOBS"] == "32"
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


@pytest.mark.parametrize(("environment", "most"), [("production", 35), ("sandbox", 2)])
def test_keda_keeps_the_scaled_workers_at_the_rosters_wanted(
    production: dict[tuple[str, str], Doc], environment: str, most: int
) -> None:
    deployment, scaled_object, trigger_auth = _scaled(production, environment)
    spec = scaled_object["spec"]
    assert spec["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert spec["pollingInterval"] == 15
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, most)
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "metrics-api"
    assert trigger["metricType"] == "AverageValue"
    meta = trigger["metadata"]
    assert (meta["targetValue"], meta["valueLocation"], meta["format"]) == ("1", "wanted", "json")
    assert meta["authMode"] == "bearer"
    url = urlsplit(meta["url"])
    assert (url.hostname, url.port, url.path) == (
        "pinecall-roster.pinecall.svc",
        8101,
        "/v1/fleet/wanted",
    )
    query = {k: v for k, (v,) in parse_qs(url.query).items()}
    # The prefix of the scaled pods' names, which are the workers' hosts (PINECALL_WORKER_HOST).
    assert query == {
        "scaled": f"{deployment['metadata']['name']}-",
        "seats": "32",
        "most": str(most),
    }
    (ref,) = trigger_auth["spec"]["secretTargetRef"]
    assert ref == {"parameter": "token", "name": "pinecall-fleet-keys", "key": environment}


@pytest.mark.parametrize("environment", sorted(ENVIRONMENTS))
def test_keda_scales_up_at_once_and_down_one_pod_per_5_min_not_within_10_min(
    production: dict[tuple[str, str], Doc], environment: str
) -> None:
    _, scaled_object, _ = _scaled(production, environment)
    behavior = scaled_object["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    down = behavior["scaleDown"]
    assert down["stabilizationWindowSeconds"] == 600
    assert down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 300}]
    assert scaled_object["spec"]["cooldownPeriod"] == 600  # the last pod, 1 -> 0, too
    up = behavior["scaleUp"]
    assert up["stabilizationWindowSeconds"] == 0
    most = scaled_object["spec"]["maxReplicaCount"]
    assert up["policies"] == [{"type": "Pods", "value": most, "periodSeconds": 15}]


def test_the_ceiling_is_the_seeds_arithmetic(production: dict[tuple[str, str], Doc]) -> None:
    at_once = math.ceil(50_000 * 4 / 60 / 10 * 2)
    assert at_once == 667
    target = RosterSettings().wanted_target  # the roster fills a scaled worker to 60 %
    assert target == 0.6
    most = production["ScaledObject", "pinecall-worker-scaled-production"]["spec"][
        "maxReplicaCount"
    ]
    assert most == math.ceil(at_once / (32 * target)) == 35


@pytest.mark.parametrize("service", sorted(MIGRATES))
def test_migrations_run_as_pre_install_and_pre_upgrade_hooks(
    production: dict[tuple[str, str], Doc], service: str
) -> None:
    job = production["Job", f"pinecall-{service}-migrate"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    container = _container(job)
    assert container["args"] == ["migrate"]
    assert (
        container["image"] == _container(production["Deployment", f"pinecall-{service}"])["image"]
    )
    assert _env(container)["PINECALL_DATABASE_URL"]["secretKeyRef"]["key"] == "uri"


def test_each_service_runs_its_own_image_and_command(
    production: dict[tuple[str, str], Doc],
) -> None:
    images = {
        name: (_container(d)["image"].rsplit("/", 1)[-1].split(":")[0], _container(d).get("args"))
        for (kind, name), d in production.items()
        if kind == "Deployment"
    }
    expected = {f"pinecall-{s}": (f"pinecall-{s}", None) for s in HTTP}
    for environment in ENVIRONMENTS:
        for role in ("core", "scaled"):
            expected[f"pinecall-worker-{role}-{environment}"] = ("pinecall-worker", None)
        expected[f"pinecall-overflow-{environment}"] = ("pinecall-overflow", None)
    # None: the image's own CMD (serve, start), which tests/test_images.py holds to the table.
    assert images == expected


def test_every_deployment_is_under_a_network_policy_and_workers_reach_no_nats_nor_postgres(
    production: dict[tuple[str, str], Doc],
) -> None:
    policies = [d for (kind, _), d in production.items() if kind == "NetworkPolicy"]
    for (kind, name), deployment in production.items():
        if kind != "Deployment":
            continue
        (policy,) = [
            p for p in policies if _selects(p["spec"]["podSelector"], _pods_labels(deployment))
        ]
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"], name
        ports = {p["port"] for rule in policy["spec"]["egress"] for p in rule.get("ports", [])}
        if _pods_labels(deployment)["app.kubernetes.io/name"] in {"worker", "overflow"}:
            assert not ports & {4222, 5432}, f"{name} may reach NATS or Postgres"


def test_postgres_stops_within_15_s(rendered: dict[str, list[Doc]]) -> None:
    (cluster,) = [d for d in rendered["postgres"] if d["kind"] == "Cluster"]
    assert cluster["spec"]["smartShutdownTimeout"] == 15
    assert cluster["spec"]["stopDelay"] > cluster["spec"]["smartShutdownTimeout"]


@pytest.mark.parametrize("cluster", ["production", "staging", "lab"])
def test_every_pinecall_variable_the_chart_sets_is_registered(
    rendered: dict[str, list[Doc]], cluster: str
) -> None:
    names = {
        env["name"]
        for doc in rendered[cluster]
        if doc["kind"] in {"Deployment", "Job"}
        for env in _container(doc).get("env", [])
    }
    assert {n for n in names if n.startswith("PINECALL_")} - PINECALL_VARIABLES == set()


def test_the_lab_runs_the_stand_ins_and_production_does_not(rendered: dict[str, list[Doc]]) -> None:
    def deployments(cluster: str) -> set[str]:
        return {d["metadata"]["name"] for d in rendered[cluster] if d["kind"] == "Deployment"}

    assert {"pinecall-lab-livekit", "pinecall-lab-vendors"} <= deployments("lab")
    assert not {n for n in deployments("production") | deployments("staging") if "lab" in n}


PUBLIC = {
    "webhook-ingest": ["/v1/livekit/webhook"],
    "dispatcher": ["/v1/tokens"],
    "call-log": [
        "/v1/callbacks",
        "/v1/calls/{call:str}/stream",
        "/v1/calls/{call:str}/log-token",
    ],
}
"""What is reached from outside, by the service that serves it: LiveKit's webhooks, a visitor's
token, the page's call back, log token and stream."""


def _served(service: str) -> set[str]:
    """The paths ``service``'s app routes (its ``app.HANDLERS``, every module's routes)."""
    module = __import__(f"pinecall_{service.replace('-', '_')}.app", fromlist=["HANDLERS"])
    return {path for handler in module.HANDLERS for path in handler.paths}


def _prefix_matches(prefix: str, path: str) -> bool:
    """Kubernetes' ``pathType: Prefix``: element by element of the ``/``-split path."""
    want, have = prefix.rstrip("/").split("/"), path.split("/")
    return have[: len(want)] == want


def test_the_ingress_routes_each_public_endpoint_to_the_service_that_serves_it(
    production: dict[tuple[str, str], Doc],
) -> None:
    (ingress,) = [d for (kind, _), d in production.items() if kind == "Ingress"]
    rules = [
        (p["path"], p["backend"]["service"]["name"], p["pathType"])
        for rule in ingress["spec"]["rules"]
        for p in rule["http"]["paths"]
    ]
    for service, paths in PUBLIC.items():
        for path in paths:
            assert path in _served(service), f"{service} serves no {path}"
            concrete = path.replace("{call:str}", "call_7Qm2x")
            routed = {name for prefix, name, _ in rules if _prefix_matches(prefix, concrete)}
            assert routed == {f"pinecall-{service}"}, (concrete, rules)
    assert {kind for _, _, kind in rules} == {"Prefix"}


@pytest.mark.parametrize("cluster", ["production", "staging", "lab"])
def test_the_chat_service_has_its_model_its_keys_and_the_dispatcher_in_every_cluster(
    rendered: dict[str, list[Doc]], cluster: str
) -> None:
    """A written call runs its model (Anthropic's API, the lab's fake on the lab) and is admitted
    at the dispatcher with the service key (issue 17)."""
    docs = {(d["kind"], d["metadata"]["name"]): d for d in rendered[cluster]}
    env = _env(_container(docs["Deployment", "pinecall-chat"]))
    wanted = {
        "production": "https://api.anthropic.com",
        "staging": "https://api.anthropic.com",
        "lab": "http://pinecall-lab-vendors.pinecall.svc:7890",
    }
    assert env["PINECALL_ANTHROPIC_URL"] == wanted[cluster]
    if cluster != "lab":
        assert env["PINECALL_MODEL"] == "claude-haiku-4-5"
    assert env["PINECALL_DISPATCHER_URL"] == "http://pinecall-dispatcher.pinecall.svc:8103"
    for name, secret in (
        ("ANTHROPIC_API_KEY", "anthropic"),
        ("PINECALL_SERVICE_KEY", "service-key"),
        ("PINECALL_FLEET_KEYS", "fleet-keys"),
        ("PINECALL_CHAT_TOKEN_SECRET", "chat-token-secret"),
    ):
        assert env[name]["secretKeyRef"]["key"] == secret, name
    assert {n for n in env if n.startswith("PINECALL_")} <= set(PINECALL_VARIABLES)
