# The build account's grants and the wait between them and the first function's build
# (terraform_data.build_grants_wait in build.tf). Which roles the grants hold, and on what, is
# checked in wiring.tftest.hcl ("least_privilege"); that the functions really wait for it, in
# tests/unit/test_infra_graph.py (terraform graph).
mock_provider "google" {
  mock_data "google_project" {
    defaults = {
      number = "123456789012"
    }
  }
}
mock_provider "archive" {}

variables {
  project_id        = "visitkit-test"
  region            = "southamerica-east1"
  shards_per_page   = 2
  cache_ttl_seconds = 10
  functions = {
    "serve-page"        = { max_instances = 2, concurrency = 1 }
    "get-counter"       = { max_instances = 2, concurrency = 1 }
    "inc-counter"       = { max_instances = 2, concurrency = 1 }
    "store-inc-counter" = { max_instances = 2, concurrency = 1 }
  }
}

run "the_wait_holds_the_build_grants" {
  command = plan

  assert {
    condition     = length(terraform_data.build_grants_wait) == 1 && terraform_data.build_grants_wait[0].input == 60
    error_message = "By default the build grants are followed by a 60 s wait."
  }
  assert {
    condition     = toset(keys(terraform_data.build_grants_wait[0].triggers_replace)) == toset(["build-writes-logs", "build-gcf-sources", "build-source-objects", "build-pushes-images"])
    error_message = "The wait's triggers are the build account's four grants, and nothing else."
  }
  assert {
    condition = { for k, g in terraform_data.build_grants_wait[0].triggers_replace : k => g.role } == {
      "build-writes-logs"    = "roles/logging.logWriter"
      "build-gcf-sources"    = "roles/storage.objectAdmin"
      "build-source-objects" = "roles/storage.objectAdmin"
      "build-pushes-images"  = "roles/artifactregistry.writer"
    }
    error_message = "The wait's triggers hold each grant's role."
  }
  assert {
    condition     = terraform_data.build_grants_wait[0].triggers_replace["build-writes-logs"].on == "project visitkit-test" && terraform_data.build_grants_wait[0].triggers_replace["build-gcf-sources"].on == "project visitkit-test" && terraform_data.build_grants_wait[0].triggers_replace["build-source-objects"].on == "bucket visitkit-test-visitkit-source"
    error_message = "The wait's triggers hold what each grant is on."
  }
  assert {
    # A second, textual check of what tests/unit/test_infra_graph.py proves with terraform graph.
    condition     = length(google_cloudfunctions2_function.this) == 4 && length(regexall("depends_on\\s*=\\s*\\[[^\\]]*terraform_data\\.build_grants_wait[,\\s]", regex("(?s)resource \"google_cloudfunctions2_function\" \"this\" \\{.*?\\n\\}", file("functions.tf")))) == 1
    error_message = "The functions must depend on terraform_data.build_grants_wait."
  }
}

# Applied against the mocks, with a 1 s wait: the local-exec really runs `sleep 1` here, and every
# trigger is known.
run "the_wait_sleeps_and_its_triggers_name_each_grant" {
  command = apply

  variables {
    build_grants_wait_seconds = 1
  }

  assert {
    condition = terraform_data.build_grants_wait[0].triggers_replace == {
      "build-writes-logs" = {
        role      = "roles/logging.logWriter"
        member    = google_service_account.build.member
        on        = "project visitkit-test"
        condition = ""
      }
      "build-gcf-sources" = {
        role      = "roles/storage.objectAdmin"
        member    = google_service_account.build.member
        on        = "project visitkit-test"
        condition = "resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-123456789012-southamerica-east1\")"
      }
      "build-source-objects" = {
        role      = "roles/storage.objectAdmin"
        member    = google_service_account.build.member
        on        = "bucket ${google_storage_bucket.source.name}"
        condition = ""
      }
      "build-pushes-images" = {
        role      = "roles/artifactregistry.writer"
        member    = google_service_account.build.member
        on        = "repository ${google_artifact_registry_repository.functions.name}"
        condition = ""
      }
    }
    error_message = "The wait's triggers name each of the build account's grants: role, member, resource and condition."
  }
  assert {
    condition     = terraform_data.build_grants_wait[0].output == 1
    error_message = "The wait's input is build_grants_wait_seconds."
  }
}

run "no_wait" {
  command = plan

  variables {
    build_grants_wait_seconds = 0
  }

  assert {
    condition     = length(terraform_data.build_grants_wait) == 0 && length(google_cloudfunctions2_function.this) == 4
    error_message = "build_grants_wait_seconds = 0 creates no wait (and runs no command); the functions are still planned."
  }
}

run "the_wait_is_set_by_its_variable" {
  command = plan

  variables {
    build_grants_wait_seconds = 600
  }

  assert {
    condition     = terraform_data.build_grants_wait[0].input == 600
    error_message = "build_grants_wait_seconds sets the wait."
  }
}
