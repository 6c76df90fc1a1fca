variable "project_id" {
  description = "The Google Cloud project the cluster lives in."
  type        = string
}

variable "name" {
  description = "The cluster's name, and the prefix of everything else made here."
  type        = string
  default     = "pinecall"
}

variable "region" {
  description = "The region of the cluster's network and of the SIP address."
  type        = string
  default     = "europe-west1"
}

variable "zone" {
  description = "The zone of the cluster (zonal: one core node, seed 000 \"Growing it\")."
  type        = string
  default     = "europe-west1-b"
}

variable "core_machine_type" {
  description = "The core node: the platform's services, Postgres, LiveKit and SIP, and the core workers (4 vCPU measured whole, seed 000)."
  type        = string
  default     = "e2-standard-4"
}

variable "core_nodes" {
  description = "Nodes of the core pool. One: the core node's services are one of each; the pool makes another if it is lost."
  type        = number
  default     = 1
}

variable "workers_machine_type" {
  description = "A node of the worker pool: one scaled worker of 32 seats (PINECALL_MAX_JOBS = vCPU x 4)."
  type        = string
  default     = "e2-standard-8"
}

variable "workers_max" {
  description = "The worker pool's ceiling: at least the sum of the chart's workers.scaled.<environment>.most (35 + 2 by default)."
  type        = number
  default     = 37

  validation {
    condition     = var.workers_max >= 0
    error_message = "workers_max is a number of nodes, 0 or more."
  }
}

variable "master_authorized_cidrs" {
  description = "Networks allowed to reach the Kubernetes API (the operators', CI's)."
  type        = map(string)
  default     = {}
}

variable "sip_source_cidrs" {
  description = "Where SIP trunks call from (the carrier's signalling and media addresses)."
  type        = list(string)
  default     = []
}

variable "labels" {
  description = "Labels on every resource that takes them."
  type        = map(string)
  default     = {}
}

variable "livekit_on_core" {
  description = "LiveKit server runs on the core node (self-hosted): open its media ports. False for LiveKit Cloud."
  type        = bool
  default     = true
}

variable "rbac_security_group" {
  description = "gke-security-groups@<your domain>, for RBAC by Google Groups; null where there is no Google Workspace."
  type        = string
  default     = null
}
