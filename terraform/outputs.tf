output "cluster_name" {
  description = "The GKE cluster's name."
  value       = google_container_cluster.this.name
}

output "cluster_location" {
  description = "The cluster's zone."
  value       = google_container_cluster.this.location
}

output "get_credentials" {
  description = "The command that points kubectl and helm at the cluster."
  value       = "gcloud container clusters get-credentials ${google_container_cluster.this.name} --zone ${google_container_cluster.this.location} --project ${var.project_id}"
}

output "sip_address" {
  description = "The core node's stable address: the SIP trunks' target (kubeip keeps it on the node)."
  value       = google_compute_address.sip.address
}

output "kubeip_service_account" {
  description = "The account kubeip's Kubernetes service account is bound to (its iam.gke.io/gcp-service-account annotation)."
  value       = google_service_account.kubeip.email
}

output "workers_max" {
  description = "The worker pool's ceiling; the chart's workers.scaled.<environment>.most should add up to no more."
  value       = var.workers_max
}
