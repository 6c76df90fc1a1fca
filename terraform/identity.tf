# The nodes' own identity: logs, metrics and pulling images, nothing else.
resource "google_service_account" "nodes" {
  project      = var.project_id
  account_id   = "${var.name}-nodes"
  display_name = "Pinecall Runtime's GKE nodes"
}

resource "google_project_iam_member" "nodes" {
  for_each = toset([
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/artifactregistry.reader",
  ])
  project = var.project_id
  role    = each.value
  member  = "serviceAccount:${google_service_account.nodes.email}"
}

# kubeip (doitintl/kubeip v2, deploy/prerequisites/kubeip.yaml): a DaemonSet on the core pool
# that gives its node the SIP address below, again whenever the pool makes the node anew. It
# acts as this account through Workload Identity (kube-system/kubeip-service-account).
resource "google_compute_address" "sip" {
  project      = var.project_id
  name         = "${var.name}-sip"
  region       = var.region
  address_type = "EXTERNAL"
  labels       = merge(local.labels, { "kubeip" = "reserved", "environment" = "sip" })
}

resource "google_service_account" "kubeip" {
  project      = var.project_id
  account_id   = "${var.name}-kubeip"
  display_name = "kubeip: the core node's SIP address"
}

resource "google_project_iam_custom_role" "kubeip" {
  project     = var.project_id
  role_id     = replace("${var.name}_kubeip", "-", "_")
  title       = "kubeip"
  description = "What kubeip needs to move a reserved address onto a node."
  permissions = [
    "compute.addresses.get",
    "compute.addresses.list",
    "compute.addresses.use",
    "compute.instances.addAccessConfig",
    "compute.instances.deleteAccessConfig",
    "compute.instances.get",
    "compute.instances.list",
    "compute.projects.get",
    "compute.subnetworks.useExternalIp",
    "compute.zoneOperations.get",
    "compute.zoneOperations.list",
  ]
}

resource "google_project_iam_member" "kubeip" {
  project = var.project_id
  role    = google_project_iam_custom_role.kubeip.name
  member  = "serviceAccount:${google_service_account.kubeip.email}"
}

resource "google_service_account_iam_member" "kubeip_workload_identity" {
  service_account_id = google_service_account.kubeip.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.project_id}.svc.id.goog[kube-system/kubeip-service-account]"
}
