// Package pluginpb is the generated wire contract of Argo CD's
// plugin.ConfigManagementPluginService (plus repository.ParameterAnnouncement).
// Edit the .proto files and run hack/proto.sh; never edit the .pb.go files.
// announce.go, written by hand, is the one conversion of announcements.
package pluginpb
