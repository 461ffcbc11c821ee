#include "distill/loss.hpp"

namespace vitkd {

torch::Tensor cross_entropy_per_sample(const torch::Tensor& logits, const torch::Tensor& labels,
                                       double smoothing) {
  auto logp = torch::log_softmax(logits.to(torch::kFloat32), -1);
  if (labels.dim() == 2) {  // mixed soft labels [B, K]: the target (1-e) y + e/K
    const auto y = labels.to(torch::kFloat32);
    auto target = smoothing > 0.0 ? y * (1.0 - smoothing) + smoothing / double(logits.size(-1)) : y;
    return -(target * logp).sum(-1);
  }
  auto nll = -logp.gather(1, labels.to(torch::kLong).unsqueeze(1)).squeeze(1);
  if (smoothing <= 0.0) return nll;
  return (1.0 - smoothing) * nll - smoothing * logp.mean(-1);
}

torch::Tensor kl_per_sample(const torch::Tensor& s, const torch::Tensor& t, double tau) {
  auto log_ps = torch::log_softmax(s.to(torch::kFloat32) / tau, -1);
  auto log_pt = torch::log_softmax(t.to(torch::kFloat32) / tau, -1);
  return (log_pt.exp() * (log_pt - log_ps)).sum(-1);
}

torch::Tensor teacher_soft_target(const torch::Tensor& t, double tau) {
  return torch::softmax(t.to(torch::kFloat32) / tau, -1);
}

torch::Tensor kl_from_probs(const torch::Tensor& s, const torch::Tensor& p, double tau) {
  auto log_ps = torch::log_softmax(s.to(torch::kFloat32) / tau, -1);
  const auto pf = p.to(torch::kFloat32);
  return (torch::xlogy(pf, pf) - pf * log_ps).sum(-1);
}

torch::Tensor teacher_loss_per_sample(const ViTOutput& out, const torch::Tensor& labels, double smoothing) {
  return cross_entropy_per_sample(out.prediction(), labels, smoothing);
}

torch::Tensor distill_loss_per_sample(const ViTOutput& st, const torch::Tensor& teacher_logits,
                                      const torch::Tensor& labels, const DistillSpec& spec) {
  const auto& s_kd = st.dist_logits.defined() ? st.dist_logits : st.logits;
  auto ce = cross_entropy_per_sample(st.logits, labels, spec.label_smoothing);
  if (spec.hard) {
    auto t_label = teacher_logits.argmax(-1);  // softmax keeps the order: the same for p
    return 0.5 * ce + 0.5 * cross_entropy_per_sample(s_kd, t_label);
  }
  const double a = spec.alpha, tau = spec.temperature;
  const auto p = spec.teacher_probs ? teacher_logits : teacher_soft_target(teacher_logits, tau);
  return (1.0 - a) * ce + a * tau * tau * kl_from_probs(s_kd, p, tau);
}

}  // namespace vitkd
